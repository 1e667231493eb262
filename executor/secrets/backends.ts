/**
 * Where sealed secrets live: Redis on a Redis deployment (every executor reads them there), the
 * data directory otherwise. Records hold only sealed values (sealing.ts); what is in clear
 * (names, host rules, header templates) is what `toolgate secret list` prints anyway.
 *
 * Redis: one hash per tenant, `toolgate:secrets:tenant:<tenant>` (field: the name, value: the
 * record as JSON), and the key check at `toolgate:secrets:key-check`.
 * Data directory: `secrets.json`, mode 0600, rewritten atomically (a new file renamed over the
 * old one); writes from one process are serialized.
 */
import type { RedisClient } from '../../shared/bus/redis-connections';
import { jsonFile } from '../json-file';
import { isSealed, Sealed } from './sealing';

/** One secret as stored. */
export interface StoredSecret {
  /** The host rules, comma-separated, as the egress grammar spells them. */
  readonly host: string;
  /** `Name: template with {value}`, when set. */
  readonly header?: string;
  /** ISO 8601 time of the `set`. */
  readonly updatedAt: string;
  readonly value: Sealed;
}

export interface SecretBackend {
  /** Where, for messages: "Redis at redis://…" or the file. */
  readonly where: string;
  readCheck(): Promise<Sealed | undefined>;
  writeCheck(check: Sealed): Promise<void>;
  /** The tenant's records by name (a Map: a name cannot be "__proto__", but a tenant can). */
  records(tenant: string): Promise<Map<string, StoredSecret>>;
  put(tenant: string, name: string, record: StoredSecret): Promise<void>;
  /** Resolves true when there was such a record. */
  remove(tenant: string, name: string): Promise<boolean>;
  /** Every tenant that has a record (for key rotation). */
  tenants(): Promise<string[]>;
}

export const SECRETS_FILE = 'secrets.json';
export const SECRETS_KEY_PREFIX = 'toolgate:secrets:tenant:';
export const SECRETS_CHECK_KEY = 'toolgate:secrets:key-check';

function fromJson(value: unknown): StoredSecret {
  const v = value as Partial<StoredSecret> | null;
  if (typeof v?.host !== 'string' || !isSealed(v.value)) throw new Error('a stored secret is not {host, value}');
  return { host: v.host, ...(typeof v.header === 'string' ? { header: v.header } : {}), updatedAt: String(v.updatedAt ?? ''), value: v.value };
}

export function redisSecretBackend(redis: RedisClient, where = 'Redis'): SecretBackend {
  const key = (tenant: string) => SECRETS_KEY_PREFIX + tenant;
  return {
    where,
    async readCheck() {
      const raw = await redis.get(SECRETS_CHECK_KEY);
      const parsed = raw === null ? undefined : (JSON.parse(raw) as unknown);
      return isSealed(parsed) ? parsed : undefined;
    },
    async writeCheck(check) {
      await redis.set(SECRETS_CHECK_KEY, JSON.stringify(check));
    },
    async records(tenant) {
      const all = await redis.hgetall(key(tenant));
      return new Map(Object.entries(all).map(([name, raw]) => [name, fromJson(JSON.parse(raw))]));
    },
    async put(tenant, name, record) {
      await redis.hset(key(tenant), name, JSON.stringify(record));
    },
    async remove(tenant, name) {
      return (await redis.hdel(key(tenant), name)) > 0;
    },
    async tenants() {
      const found: string[] = [];
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', `${SECRETS_KEY_PREFIX}*`, 'COUNT', 500);
        cursor = next;
        for (const k of keys) found.push(k.slice(SECRETS_KEY_PREFIX.length));
      } while (cursor !== '0');
      return found;
    },
  };
}

interface FileShape {
  check?: Sealed;
  tenants: Map<string, Map<string, StoredSecret>>;
}

export function fileSecretBackend(dataDir: string): SecretBackend {
  const store = jsonFile<FileShape>(dataDir, SECRETS_FILE, {
    parse(value) {
      const all = value as { check?: unknown; tenants?: Record<string, Record<string, unknown>> };
      const tenants = new Map(Object.entries(all.tenants ?? {}).map(([t, recs]) => [t, new Map(Object.entries(recs).map(([n, r]) => [n, fromJson(r)]))]));
      return { ...(isSealed(all.check) ? { check: all.check } : {}), tenants };
    },
    empty: () => ({ tenants: new Map() }),
    serialize: (all) => ({
      check: all.check,
      tenants: Object.fromEntries([...all.tenants].filter(([, r]) => r.size > 0).map(([t, r]) => [t, Object.fromEntries(r)])),
    }),
  });
  const readAll = () => store.read();
  const update = <T>(change: (all: FileShape) => T): Promise<T> => store.update(change);

  return {
    where: store.path,
    async readCheck() {
      return (await readAll()).check;
    },
    writeCheck(check) {
      return update((all) => void (all.check = check));
    },
    async records(tenant) {
      return new Map((await readAll()).tenants.get(tenant));
    },
    put(tenant, name, record) {
      return update((all) => {
        const recs = all.tenants.get(tenant) ?? new Map<string, StoredSecret>();
        recs.set(name, record);
        all.tenants.set(tenant, recs);
      });
    },
    remove(tenant, name) {
      return update((all) => all.tenants.get(tenant)?.delete(name) ?? false);
    },
    async tenants() {
      return [...(await readAll()).tenants.keys()];
    },
  };
}
