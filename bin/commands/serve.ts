/**
 * `toolgate serve`: the HTTP gateway. Resolves the token secret (TOOLGATE_JWT_SECRET, else the
 * data directory's secret file, created on first start), opens the bus (Redis when
 * TOOLGATE_REDIS_URL is set, else in-process with the executor embedded here), and serves
 * JSON-RPC on TOOLGATE_HOST:TOOLGATE_PORT. stdout stays empty; what a person needs to read
 * (where it listens, how to get a token, warnings) goes to stderr. SIGTERM/SIGINT: stop taking
 * requests, let running ones finish within TOOLGATE_SHUTDOWN_GRACE_MS, then close.
 */
import * as path from 'node:path';
import type { startExecutor } from '../../executor/executor';
import { createAuthenticators } from '../../gateway/auth/index';
import { createGateway } from '../../gateway/gateway';
import { listen } from '../../gateway/listen';
import { ensureSecretFile, secretFilePath } from '../../shared/auth/secret';
import { createBus } from '../../shared/bus/index';
import type { Config } from '../../shared/config';
import { createQuotaStore } from '../../shared/quota/index';
import type { Logger } from '../../shared/log';
import { parseFlags } from '../flags';
import type { Command } from './command';
import { startWithStrongestSandbox } from './sandbox-choice';

/** `backends`: the registered sandbox backends' ids. */
const serveUsage = (backends: readonly string[]) => `Usage: toolgate serve

Serves MCP (JSON-RPC 2.0) over HTTP: POST a request or a batch to / with
Authorization: Bearer <token> and Content-Type: application/json.

Configured by the environment (see the README for every variable):
  TOOLGATE_HOST, TOOLGATE_PORT   where to listen (default 127.0.0.1:3000)
  TOOLGATE_JWT_SECRET            token signing secret (default: <data dir>/jwt-secret, created on first start)
  TOOLGATE_DATA_DIR              secret file and tenant workspaces (default ./.toolgate)
  TOOLGATE_SANDBOX               ${backends.join(' | ')}: where file and command tools run
                                 (default: bwrap when it can run here, else none, with a warning;
                                 docker runs TOOLGATE_SANDBOX_IMAGE, built by npm run sandbox:image)
  TOOLGATE_REDIS_URL             use BullMQ on this Redis; tools then run in \`toolgate executor\`
                                 processes (this gateway runs none; /readyz is 503 while a shard
                                 has no executor)
  TOOLGATE_MAX_CONCURRENT_CALLS, TOOLGATE_CALLS_PER_MINUTE   per-identity limits on tools/call
  TOOLGATE_MAX_MESSAGE_BYTES     largest request body (413 beyond it)

Get a token with \`toolgate token --id alice\` (the same as generate-token; run it with the same
TOOLGATE_DATA_DIR or TOOLGATE_JWT_SECRET). The start-up banner prints the exact command.`;

const say = (line: string) => process.stderr.write(`toolgate serve: ${line}\n`);
/** A word a POSIX shell reads back as it is (quoted only when it needs to be). */
const shellWord = (s: string) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

/** Starts the embedded executor on the strongest sandbox available (sandbox-choice.ts). */
async function startEmbeddedExecutor(config: Readonly<Config>, bus: Parameters<typeof startExecutor>[0]['bus'], log: Logger) {
  // Loaded only here: a gateway on Redis runs no tools, and what it loads stays resident.
  const { startExecutor } = await import('../../executor/executor');
  const { started, sandbox } = await startWithStrongestSandbox(config, (chosen) => startExecutor({ config: chosen, bus, log, noneInProcess: true }), say, log);
  return { executor: started, sandbox };
}

/**
 * Resolves on the first SIGTERM/SIGINT; a second one exits at once. Installed before anything
 * starts, so a signal during start-up still gets a clean stop (after start-up completes).
 */
function stopSignal(graceMs: number): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    let stopping = false;
    const onSignal = (signal: NodeJS.Signals) => {
      if (stopping) process.exit(130);
      stopping = true;
      say(`${signal}: finishing running requests (up to ${graceMs} ms), then stopping`);
      resolve(signal);
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
}

/**
 * The sandbox backends' registry, loaded only when an executor is embedded or for --help: a
 * gateway on Redis never loads the executor's code.
 */
function sandboxBackends() {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- a lazy load, on purpose (above)
  return (require('../../executor/sandbox/registry') as typeof import('../../executor/sandbox/registry')).SANDBOX_BACKENDS;
}

export async function runServe(argv: readonly string[], config: Readonly<Config>, log: Logger): Promise<number> {
  parseFlags(argv, { values: [] });
  // A TOOLGATE_SANDBOX no backend is registered for stops start-up before anything is created.
  if (config.bus.redisUrl === undefined && config.sandboxExplicit) sandboxBackends().get(config.sandbox);
  const stopRequested = stopSignal(config.shutdownGraceMs);

  let secret = config.jwtSecret;
  if (secret === undefined) {
    const ensured = await ensureSecretFile(config.dataDir);
    secret = ensured.secret;
    if (ensured.created) {
      const file = secretFilePath(config.dataDir);
      say(`created a new token signing secret in ${file} (mode 0600); tokens from toolgate token / generate-token are signed with it. Keep it private.`);
      log.info({ file }, 'created the token signing secret');
    }
  }

  const bus = await createBus(config, log);
  // The per-identity counters: on the bus's Redis when there is one, so every gateway shares them.
  const quotas = await createQuotaStore(config).catch(async (err: unknown) => {
    await bus.close();
    throw err;
  });
  const embedded = config.bus.redisUrl === undefined;
  let executor: { close(): Promise<void> } | undefined;
  let sandbox: string | undefined;
  let gateway: ReturnType<typeof createGateway> | undefined;
  const cleanup = async () => {
    await executor?.close();
    await gateway?.close();
    await quotas.close();
    await bus.close();
  };

  let listening: Awaited<ReturnType<typeof listen>>;
  try {
    if (embedded) ({ executor, sandbox } = await startEmbeddedExecutor(config, bus, log));
    gateway = createGateway({ config, bus, authenticators: createAuthenticators({ secret, revocations: bus.revocations }), log, quotas });
    listening = await listen(gateway.app, config.gateway.host, config.gateway.port);
  } catch (err) {
    await cleanup();
    throw err;
  }

  // A command that runs our own issuer from any directory: absolute paths, and the data directory
  // spelled out (its default is relative). `npx generate-token` outside this checkout would run an
  // unrelated npm package of that name.
  const toolgateBin = path.resolve(__dirname, '../toolgate.js');
  const secretFrom = config.jwtSecret === undefined ? `TOOLGATE_DATA_DIR=${shellWord(config.dataDir)} ` : '';
  // One write, so a reader never sees the address without the instructions that follow it.
  process.stderr.write(
    [
      `listening on ${listening.url} (bus: ${embedded ? `in-process, executor embedded, sandbox: ${sandbox}` : 'redis'})`,
      `get a token:   ${secretFrom}${shellWord(process.execPath)} ${shellWord(toolgateBin)} token --id alice` +
        (config.jwtSecret === undefined ? '' : '   (with the same TOOLGATE_JWT_SECRET)'),
      `then:          curl -s ${listening.url} -H "Authorization: Bearer $TOKEN" -H "Content-Type: application/json" -d '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}'`,
    ]
      .map((line) => `toolgate serve: ${line}\n`)
      .join(''),
  );
  // A gateway on Redis runs no tools: its executors (`toolgate executor`) say which sandbox they run.
  log.info({ url: listening.url, ...(embedded ? { sandbox, bus: 'in-process' } : { bus: 'redis' }) }, 'toolgate serve ready');

  await stopRequested;
  gateway.drain();
  await listening.close(config.shutdownGraceMs);
  await cleanup();
  log.info('toolgate serve stopped');
  return 0;
}

export const serveCommand: Command = {
  summary: 'serve MCP over HTTP (the gateway; embeds the executor without Redis)',
  get usage() {
    return serveUsage(sandboxBackends().ids);
  },
  run: runServe,
};
