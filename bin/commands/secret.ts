/**
 * `toolgate secret set|list|rm|rotate-key`: a tenant's secrets, used on its behalf by
 * http_request and the egress proxy, never seen by its sandbox or the model. A value is read from
 * stdin or a file, never from the command line (every local user can read a process's argv).
 */
import { promises as fs } from 'node:fs';
import type { Readable } from 'node:stream';
import { closeConnection, failFastConnection, waitReady } from '../../shared/bus/redis-connections';
import { describeRedis } from '../../shared/redis-config';
import type { Config } from '../../shared/config';
import type { Logger } from '../../shared/log';
import { SecretsUnavailable } from '../../shared/secrets/broker';
import { fileSecretBackend, redisSecretBackend } from '../../executor/secrets/backends';
import { createSecretStore, SecretInputError, SecretStore } from '../../executor/secrets/store';
import { parseFlags, UsageError } from '../flags';
import type { Command } from './command';

export const SECRET_USAGE = `Usage: toolgate secret set --id ID --name NAME --host RULES [--header 'Authorization: Bearer {value}'] [--value-file FILE]
       toolgate secret list --id ID
       toolgate secret rm --id ID --name NAME
       toolgate secret rotate-key

  set         store a secret for the tenant; the value is read from stdin (one trailing newline
              dropped) or from --value-file, never from the command line
  list        the tenant's secrets: names, host rules, header templates (never values)
  rm          remove a secret; the next request no longer gets it
  rotate-key  re-encrypt every secret from TOOLGATE_SECRETS_KEY_OLD to TOOLGATE_SECRETS_KEY

NAME is an environment variable name (^[A-Z_][A-Z0-9_]{0,63}$). The model and the sandbox see
only {{secret:NAME}} (commands get it as the value of the variable NAME); http_request and the
egress proxy swap it for the value in request headers, Basic credentials included, only for
hosts that match RULES (the egress rule grammar: host, *.host, host:port, IP, CIDR; comma-separated).
--header adds that header to every request to those hosts that lacks it.

Values are encrypted with AES-256-GCM under TOOLGATE_SECRETS_KEY (32 random bytes, hex or
base64: openssl rand -hex 32). Stored on Redis with TOOLGATE_REDIS_URL, else in the data
directory (TOOLGATE_DATA_DIR/secrets.json).`;

const REDIS_READY_MS = 5000;

async function withStore<T>(config: Readonly<Config>, use: (store: SecretStore) => Promise<T>): Promise<T> {
  if (!config.redis) return use(createSecretStore(fileSecretBackend(config.dataDir), config.secrets.key));
  const redis = failFastConnection(config.redis, 'toolgate-secret-cli');
  redis.on('error', () => undefined);
  try {
    await waitReady(redis, config.redis, REDIS_READY_MS);
    return await use(createSecretStore(redisSecretBackend(redis, describeRedis(config.redis)), config.secrets.key));
  } finally {
    await closeConnection(redis);
  }
}

async function readValue(file: string | undefined, stdin: Readable): Promise<string> {
  let text: string;
  if (file !== undefined) text = await fs.readFile(file, 'utf8');
  else {
    if ((stdin as { isTTY?: boolean }).isTTY) process.stderr.write('value (end with Ctrl-D): ');
    const chunks: Buffer[] = [];
    for await (const chunk of stdin) chunks.push(Buffer.from(chunk as Buffer));
    text = Buffer.concat(chunks).toString('utf8');
  }
  return text.replace(/\r?\n$/, '');
}

export async function runSecret(argv: readonly string[], config: Readonly<Config>, log: Logger, stdin: Readable = process.stdin): Promise<number> {
  const [action, ...rest] = argv;
  const out = (text: string) => process.stdout.write(text + '\n');
  const values = { set: ['id', 'name', 'host', 'header', 'value-file'], list: ['id'], rm: ['id', 'name'], 'rotate-key': [] as string[] };
  if (action === undefined || !Object.hasOwn(values, action)) {
    throw new UsageError(`secret needs an action: set, list, rm or rotate-key${action ? `, got "${action}"` : ''}`);
  }
  const flags = parseFlags(rest, { values: values[action as keyof typeof values] });
  const need = (name: string, why: string): string => {
    const v = flags.get(name);
    if (typeof v !== 'string') throw new UsageError(`--${name} is required: ${why}`);
    return v;
  };
  try {
    if (action === 'rotate-key') {
      const moved = await withStore(config, (s) => s.rotate(config.secrets.oldKey));
      log.info({ records: moved }, 'secret store key rotated');
      out(`rotated: ${moved} secret(s) re-encrypted from TOOLGATE_SECRETS_KEY_OLD to TOOLGATE_SECRETS_KEY; the old key is no longer needed`);
      return 0;
    }
    const id = need('id', 'the identity (tenant) whose secrets these are');
    if (action === 'list') {
      const records = await withStore(config, (s) => s.list(id));
      if (records.length === 0) process.stderr.write(`note: ${JSON.stringify(id)} has no secrets\n`);
      for (const r of records) out(`${r.name}\thost=${r.host}${r.header ? `\theader=${r.header}` : ''}\tset=${r.updatedAt}`);
      return 0;
    }
    const name = need('name', "the secret's name, e.g. GITHUB_TOKEN");
    if (action === 'rm') {
      const had = await withStore(config, (s) => s.remove(id, name));
      if (had) log.info({ id, name }, 'secret removed');
      out(had ? `removed: ${JSON.stringify(id)}'s secret ${name}` : `${JSON.stringify(id)} has no secret named ${name}`);
      return 0;
    }
    const host = need('host', 'the hosts the secret may be sent to (egress rules: host, *.host, host:port, …)');
    const header = flags.get('header') as string | undefined;
    // Checked before the value is read, so a refusal does not wait for stdin.
    await withStore(config, (s) => s.verifyKey());
    const value = await readValue(flags.get('value-file') as string | undefined, stdin);
    const stored = await withStore(config, (s) => s.set(id, { name, host, value, ...(header !== undefined ? { header } : {}) }));
    log.info({ id, name, host: stored.host }, 'secret set');
    out(`set: ${JSON.stringify(id)}'s secret ${name}, sent only to ${stored.host}${stored.header ? ` (header ${stored.header})` : ''}`);
    out(`use it as {{secret:${name}}} (commands also see the variable ${name} with that text)`);
    return 0;
  } catch (err) {
    if (err instanceof SecretInputError) throw new UsageError(err.message);
    if (err instanceof SecretsUnavailable) {
      process.stderr.write(`toolgate: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
}

export const secretCommand: Command = { summary: "set, list or remove a tenant's secrets; rotate their key", usage: SECRET_USAGE, run: runSecret };
