/**
 * `toolgate serve`: the HTTP gateway. Resolves the token secret (TOOLGATE_JWT_SECRET, else the
 * data directory's secret file, created on first start), opens the bus (Redis when
 * TOOLGATE_REDIS_URL is set, else in-process with the executor embedded here), and serves
 * JSON-RPC on TOOLGATE_HOST:TOOLGATE_PORT (or the flags that stand for them: SERVE_SETTINGS). stdout stays empty; what a person needs to read
 * (where it listens, how to get a token, warnings) goes to stderr. SIGTERM/SIGINT: stop taking
 * requests, let running ones finish within TOOLGATE_SHUTDOWN_GRACE_MS, then close.
 */
import * as path from 'node:path';
import type { startExecutor } from '../../executor/executor';
import { createAuthenticators } from '../../gateway/auth/index';
import { createGateway } from '../../gateway/gateway';
import { bind, Listening } from '../../gateway/listen';
import { ensureSecretFile, secretFilePath } from '../../shared/auth/secret';
import { createBus } from '../../shared/bus/index';
import type { Config } from '../../shared/config';
import { createQuotaStore } from '../../shared/quota/index';
import type { Logger } from '../../shared/log';
import { parseFlags, settingsHelp } from '../flags';
import type { Command } from './command';
import { gitWorkTreeOf } from './git-work-tree';
import { ALLOWED_HOSTS, ALLOWED_ORIGINS, DATA_DIR, HOST, LOG_FORMAT, LOG_LEVEL, NONE_IDENTITY, PORT, REDIS_URL, sandboxSetting } from './settings';
import { startWithStrongestSandbox } from './sandbox-choice';

const SERVE_SETTINGS = [
  HOST,
  PORT,
  DATA_DIR,
  sandboxSetting('(default: bwrap when it can run here, else none, with a warning;', 'docker runs TOOLGATE_SANDBOX_IMAGE, built by npm run sandbox:image)'),
  REDIS_URL,
  NONE_IDENTITY,
  ALLOWED_ORIGINS,
  ALLOWED_HOSTS,
  LOG_LEVEL,
  LOG_FORMAT,
] as const;

/** A function: the sandbox flag's help reads the registry, which only --help should load. */
const serveUsage = () => `Usage: toolgate serve [options]

Serves MCP (JSON-RPC 2.0) over HTTP: POST a request or a batch to / with
Authorization: Bearer <token> and Content-Type: application/json.

Options (each sets the environment variable beside it, and wins over it):
${settingsHelp(SERVE_SETTINGS)}
  --help, -h
      print this text

Also configured by the environment only (see the README for every variable):
  TOOLGATE_JWT_SECRET            token signing secret (default: <data dir>/jwt-secret, created on first start;
                                 no flag: a flag's value shows in the process list)
  TOOLGATE_MAX_CONCURRENT_CALLS, TOOLGATE_CALLS_PER_MINUTE   per-identity limits on tools/call
  TOOLGATE_MAX_MESSAGE_BYTES     largest request body (413 beyond it)

Example: toolgate serve --port 8080 --data-dir /var/lib/toolgate

Get a token with \`toolgate token --id alice\` (the same as generate-token; run it with the same
TOOLGATE_DATA_DIR or TOOLGATE_JWT_SECRET). The start-up banner prints the exact command.`;

const say = (line: string) => process.stderr.write(`toolgate serve: ${line}\n`);
/** A word a POSIX shell reads back as it is (quoted only when it needs to be). */
const shellWord = (s: string) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

/** Starts the embedded executor on the strongest sandbox available (sandbox-choice.ts). */
async function startEmbeddedExecutor(config: Readonly<Config>, bus: Parameters<typeof startExecutor>[0]['bus'], log: Logger) {
  // Loaded only here: a gateway on Redis runs no tools, and what it loads stays resident.
  const { startExecutor } = await import('../../executor/executor');
  const { started, sandbox } = await startWithStrongestSandbox(config, (chosen) => startExecutor({ config: chosen, bus, log, embedded: true }), say, log);
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
  if (config.redis === undefined && config.sandboxExplicit) sandboxBackends().get(config.sandbox);
  const stopRequested = stopSignal(config.shutdownGraceMs);

  // The port first: a second serve on a busy port must fail before it touches the data directory.
  const bound = await bind(config.gateway.host, config.gateway.port);
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

  const checkout = gitWorkTreeOf(config.dataDir);
  if (checkout !== undefined) {
    say(
      `the data directory ${config.dataDir} is inside the git work tree ${checkout}: \`git clean -fdx\` there deletes it (the signing secret and every workspace). Set --data-dir or TOOLGATE_DATA_DIR to a place of its own for anything you keep.`,
    );
    log.warn({ dataDir: config.dataDir, workTree: checkout }, 'the data directory is inside a git work tree');
  }

  const bus = await createBus(config, log).catch(async (err: unknown) => {
    await bound.close();
    throw err;
  });
  // The per-identity counters: on the bus's Redis when there is one, so every gateway shares them.
  const quotas = await createQuotaStore(config).catch(async (err: unknown) => {
    await bus.close();
    await bound.close();
    throw err;
  });
  const embedded = config.redis === undefined;
  let executor: { close(): Promise<void> } | undefined;
  let sandbox: string | undefined;
  let gateway: ReturnType<typeof createGateway> | undefined;
  const cleanup = async () => {
    await executor?.close();
    await gateway?.close();
    await quotas.close();
    await bus.close();
  };

  let listening: Listening;
  try {
    if (embedded) ({ executor, sandbox } = await startEmbeddedExecutor(config, bus, log));
    gateway = createGateway({ config, bus, authenticators: createAuthenticators({ secret, revocations: bus.revocations, oauth: config.oauth }), log, quotas });
    listening = bound.serve(gateway.app);
  } catch (err) {
    await cleanup();
    await bound.close();
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
      `get a token:   ${secretFrom}${shellWord(process.execPath)} ${shellWord(toolgateBin)} token --id alice --url ${shellWord(listening.url)}` +
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
    return serveUsage();
  },
  settings: SERVE_SETTINGS,
  run: runServe,
};
