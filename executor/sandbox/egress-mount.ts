/**
 * Governed egress as the docker and bwrap backends see it: each sandbox gets a directory of its
 * own on the host (outside every workspace), bind-mounted read-only at /run/toolgate, where the
 * executor's egress proxy listens for that sandbox's tenant on `egress.sock`; the agent relays
 * 127.0.0.1:3128 inside to it and gives commands the proxy variables. The directory is mounted,
 * not the socket file, so a socket made after the sandbox started (a pre-started docker sandbox
 * learns its tenant later) still appears inside. Every sandbox gets it, policy or not: a policy
 * set later applies to its next connection without a restart.
 *
 * The sandbox cannot choose whose policy applies: the tenant is the channel's, fixed by the
 * executor when it opens the socket.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, promises as fs } from 'node:fs';
import * as path from 'node:path';
import type { Sandbox } from './backend';

/** Where the directory appears inside a sandbox. */
export const EGRESS_DIR_IN_SANDBOX = '/run/toolgate';
const SOCKET_NAME = 'egress.sock';
/**
 * The trust bundle commands use when the executor intercepts TLS for a host that has a secret
 * (system roots plus the executor's egress CA, never its key): copied into each sandbox's
 * directory when the executor has one, and named to the agent, which gives commands the usual
 * CA variables only when the file is there.
 */
const CA_BUNDLE_NAME = 'ca-bundle.pem';
/** The relay's port on the sandbox's loopback: the usual forward-proxy port. */
export const EGRESS_RELAY_PORT = 3128;
/** Unix socket paths are limited to 107 bytes on Linux. */
const MAX_SOCKET_PATH = 107;

/** The executor's side, given to backends (BackendDeps.egress). */
export interface SandboxEgress {
  /** Host directory under which each sandbox's directory is made (the executor's data dir's `egress/`). */
  readonly baseDir: string;
  /** Starts the proxy for `tenant` on `socketPath`; the returned close stops it. */
  open(tenant: string, socketPath: string): Promise<{ close(): Promise<void> }>;
  /** The host's trust bundle for intercepted TLS (secrets), copied into every sandbox's directory; unset: none. */
  readonly caBundleFile?: string;
}

/** One sandbox's egress directory: made before its sandbox, attached to a tenant, removed after. */
export interface EgressMount {
  /** The host directory to bind-mount at EGRESS_DIR_IN_SANDBOX. */
  readonly hostDir: string;
  /** Opens the proxy for `tenant` in the directory (once). */
  attach(tenant: string): Promise<void>;
  /** Stops the proxy and removes the directory. Idempotent. */
  release(): Promise<void>;
}

/** Where Debian (the sandbox image's base, and the host's view bwrap binds) keeps the system's CA bundle. */
export const SYSTEM_CA_BUNDLE = '/etc/ssl/certs/ca-certificates.crt';

/** The trust bundle in a sandbox's egress directory on the host, when the executor put one there. */
export function egressBundleFile(hostDir: string): string | undefined {
  const file = path.join(hostDir, CA_BUNDLE_NAME);
  return existsSync(file) ? file : undefined;
}

/** The agent's flags for the relay. */
export function egressAgentArgs(): string[] {
  return [
    '--egress-socket',
    `${EGRESS_DIR_IN_SANDBOX}/${SOCKET_NAME}`,
    '--egress-port',
    String(EGRESS_RELAY_PORT),
    '--egress-ca',
    `${EGRESS_DIR_IN_SANDBOX}/${CA_BUNDLE_NAME}`,
  ];
}

/** Throws, at start, when the sockets under `baseDir` would be too long a path for the kernel. */
export function checkEgressBaseDir(baseDir: string): void {
  const longest = path.join(baseDir, 'x'.repeat(16), SOCKET_NAME);
  if (Buffer.byteLength(longest) > MAX_SOCKET_PATH) {
    throw new Error(
      `the egress sockets would live at ${longest}, longer than the ${MAX_SOCKET_PATH} bytes a Unix socket path may have: use a shorter TOOLGATE_DATA_DIR`,
    );
  }
}

/** Makes a new directory for one sandbox (mode 0711: the sandbox's uid reaches the socket but cannot list). */
export async function createEgressMount(egress: SandboxEgress): Promise<EgressMount> {
  await fs.mkdir(egress.baseDir, { recursive: true, mode: 0o700 });
  const hostDir = path.join(egress.baseDir, randomBytes(8).toString('hex'));
  await fs.mkdir(hostDir, { mode: 0o711 });
  await fs.chmod(hostDir, 0o711);
  if (egress.caBundleFile) {
    await fs.copyFile(egress.caBundleFile, path.join(hostDir, CA_BUNDLE_NAME));
    await fs.chmod(path.join(hostDir, CA_BUNDLE_NAME), 0o644);
  }
  let channel: Promise<{ close(): Promise<void> }> | undefined;
  let released: Promise<void> | undefined;
  return {
    hostDir,
    attach(tenant) {
      if (channel) throw new Error('an egress mount serves one tenant only');
      channel = egress.open(tenant, path.join(hostDir, SOCKET_NAME));
      return channel.then(() => undefined);
    },
    release() {
      released ??= (async () => {
        await (await channel?.catch(() => undefined))?.close();
        await fs.rm(hostDir, { recursive: true, force: true });
      })();
      return released;
    },
  };
}

/** `sandbox`, whose exit (and stop) completes only after `release` has run. */
export function releasedWith(sandbox: Sandbox, release: () => Promise<void>): Sandbox {
  const exited = sandbox.exited.then(async (reason) => {
    await release().catch(() => undefined);
    return reason;
  });
  return {
    call: (tool, args, signal, onProgress) => sandbox.call(tool, args, signal, onProgress),
    get alive() {
      return sandbox.alive;
    },
    exited,
    processEnded: (handle) => sandbox.processEnded(handle),
    async stop() {
      await sandbox.stop();
      await exited;
    },
  };
}
