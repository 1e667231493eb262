/**
 * The per-tenant secret store: `toolgate secret set|list|rm|rotate-key` write it, the executor
 * opens a tenant's secrets per request (so `rm` is effective for the next request). Every
 * operation first checks the key: none, one that is not 32 bytes, or one that does not open the
 * store's key check is refused with a SecretsUnavailable sentence, never a crash.
 *
 * A secret: NAME (an environment variable name), host rules in the egress grammar
 * (executor/egress/rules.ts) it may be sent to, an optional header template, and the value,
 * sealed with AES-256-GCM bound to all of them (sealing.ts).
 */
import { isIP } from 'node:net';
import { SecretsUnavailable } from '../../shared/secrets/broker';
import { SECRET_NAME } from '../../shared/secrets/placeholder';
import type { OpenSecret } from '../../shared/secrets/secret-set';
import { EgressRuleError, formatRules, parseRules, ruleMatchesAddress, ruleMatchesName } from '../egress/rules';
import type { SecretBackend } from './backends';
import { opensCheck, parseKey, recordAad, seal, sealCheck, unseal } from './sealing';

/** A secret as `list` shows it: never its value. */
export interface SecretRecord {
  readonly name: string;
  readonly host: string;
  readonly header?: string;
  readonly updatedAt: string;
}

export interface SecretInput {
  name: string;
  host: string;
  header?: string;
  value: string;
}

export interface SecretStore {
  readonly where: string;
  /** Throws SecretsUnavailable when the key is missing, malformed or does not open the store. */
  verifyKey(): Promise<void>;
  list(tenant: string): Promise<SecretRecord[]>;
  /** The names only (what a sandbox's environment gets). */
  names(tenant: string): Promise<string[]>;
  /** The tenant's secrets with their values; a record that does not open is left out. */
  open(tenant: string): Promise<OpenSecret[]>;
  /** Validates (throws SecretInputError naming the field) and stores, replacing a secret of that name. */
  set(tenant: string, input: SecretInput): Promise<SecretRecord>;
  remove(tenant: string, name: string): Promise<boolean>;
  /** Re-seals every record from `oldKey` to this store's key; resumable. The number re-sealed. */
  rotate(oldKeyText: string | undefined): Promise<number>;
}

/** A bad name, host rule, header template or value; the message names it (never the value). */
export class SecretInputError extends Error {
  override readonly name = 'SecretInputError';
}

const MIN_VALUE = 8;
const MAX_VALUE = 8192;
const HEADER = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*(.*)$/;
const WRONG_KEY =
  'secrets are refused: TOOLGATE_SECRETS_KEY does not open the secret store (it was sealed with another key); ' +
  'set the key it was sealed with, or move it to a new key with `toolgate secret rotate-key` (old key in TOOLGATE_SECRETS_KEY_OLD)';

function checkInput(input: SecretInput): { host: string; header: string | undefined } {
  if (!SECRET_NAME.test(input.name))
    throw new SecretInputError(`--name "${input.name}" is not valid: use an environment variable name, ^[A-Z_][A-Z0-9_]{0,63}$ (e.g. GITHUB_TOKEN)`);
  let host: string;
  try {
    host = formatRules(parseRules(input.host, '--host'));
  } catch (err) {
    if (err instanceof EgressRuleError) throw new SecretInputError(err.message);
    throw err;
  }
  if (host === '') throw new SecretInputError('--host needs at least one rule: the hosts the secret may be sent to');
  let header: string | undefined;
  if (input.header !== undefined) {
    const m = HEADER.exec(input.header);
    if (!m || !(m[2] ?? '').includes('{value}') || /[\r\n\0]/.test(input.header)) {
      throw new SecretInputError(`--header must be "Name: text with {value}", e.g. "Authorization: Bearer {value}"`);
    }
    header = `${m[1]}: ${m[2]}`;
  }
  const v = input.value;
  if (v.length < MIN_VALUE)
    throw new SecretInputError(`the value must be at least ${MIN_VALUE} characters (shorter ones cannot be told apart in responses to redact them)`);
  if (v.length > MAX_VALUE) throw new SecretInputError(`the value must be at most ${MAX_VALUE} characters`);
  // eslint-disable-next-line no-control-regex -- control characters are what is refused
  if (/[\x00-\x1f\x7f]/.test(v)) throw new SecretInputError('the value must not hold control characters (line breaks, NUL): it is sent in header values');
  return { host, header };
}

/** The secret's rules as one matcher over a normalized host and a port. */
export function hostMatcher(hostRules: string): (host: string, port: number) => boolean {
  const rules = parseRules(hostRules);
  return (host, port) => rules.some((r) => (isIP(host) !== 0 ? ruleMatchesAddress(r, host, port) : ruleMatchesName(r, host, port)));
}

function splitHeader(header: string | undefined): { name: string; template: string } | undefined {
  if (header === undefined) return undefined;
  const at = header.indexOf(':');
  return { name: header.slice(0, at), template: header.slice(at + 1).trim() };
}

export function createSecretStore(backend: SecretBackend, keyText: string | undefined, now: () => Date = () => new Date()): SecretStore {
  /** The key once it opens the store (the check is read every time: a rotation elsewhere shows at once). */
  let opened: string | undefined; // the check last opened with this key: the same bytes open again
  const key = async (): Promise<Buffer> => {
    const k = parseKey(keyText);
    const check = await backend.readCheck();
    if (!check) return k;
    const seen = `${check.iv}.${check.data}.${check.tag}`;
    if (seen === opened) return k;
    if (!opensCheck(k, check)) throw new SecretsUnavailable(WRONG_KEY);
    opened = seen;
    return k;
  };
  const record = (name: string, s: { host: string; header?: string; updatedAt: string }): SecretRecord => ({
    name,
    host: s.host,
    ...(s.header !== undefined ? { header: s.header } : {}),
    updatedAt: s.updatedAt,
  });

  return {
    where: backend.where,
    async verifyKey() {
      await key();
    },
    async list(tenant) {
      await key();
      return [...(await backend.records(tenant))].map(([name, s]) => record(name, s)).sort((a, b) => a.name.localeCompare(b.name));
    },
    // names and open run per call: the key check and the records are read at once (the file
    // backend makes that one stat).
    async names(tenant) {
      const [, records] = await Promise.all([key(), backend.records(tenant)]);
      return [...records.keys()].sort();
    },
    async open(tenant) {
      const [k, records] = await Promise.all([key(), backend.records(tenant)]);
      const out: OpenSecret[] = [];
      for (const [name, s] of records) {
        const value = unseal(k, s.value, recordAad(tenant, name, s.host, s.header));
        if (value === undefined) continue;
        const header = splitHeader(s.header);
        out.push({ name, hostText: s.host, matches: hostMatcher(s.host), value, ...(header ? { header } : {}) });
      }
      return out;
    },
    async set(tenant, input) {
      const { host, header } = checkInput(input);
      const k = await key();
      if (!(await backend.readCheck())) await backend.writeCheck(sealCheck(k));
      const stored = {
        host,
        ...(header !== undefined ? { header } : {}),
        updatedAt: now().toISOString(),
        value: seal(k, input.value, recordAad(tenant, input.name, host, header)),
      };
      await backend.put(tenant, input.name, stored);
      return record(input.name, stored);
    },
    async remove(tenant, name) {
      await key();
      return backend.remove(tenant, name);
    },
    async rotate(oldKeyText) {
      const next = parseKey(keyText);
      const old = parseKey(oldKeyText, 'TOOLGATE_SECRETS_KEY_OLD');
      const check = await backend.readCheck();
      // The check moves last: a rotation that stopped half-way is resumed by running it again.
      if (check && !opensCheck(old, check) && !opensCheck(next, check)) {
        throw new SecretsUnavailable('key rotation refused: neither TOOLGATE_SECRETS_KEY_OLD nor TOOLGATE_SECRETS_KEY opens the secret store');
      }
      let moved = 0;
      for (const tenant of await backend.tenants()) {
        for (const [name, s] of await backend.records(tenant)) {
          const aad = recordAad(tenant, name, s.host, s.header);
          if (unseal(next, s.value, aad) !== undefined) continue;
          const value = unseal(old, s.value, aad);
          if (value === undefined) throw new SecretsUnavailable(`key rotation stopped: ${tenant}'s secret ${name} opens with neither key`);
          await backend.put(tenant, name, { ...s, value: seal(next, value, aad) });
          moved++;
        }
      }
      await backend.writeCheck(sealCheck(next));
      return moved;
    },
  };
}
