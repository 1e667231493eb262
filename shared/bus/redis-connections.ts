/**
 * The Redis connections of the BullMQ bus, in two kinds:
 * - `failFast`: commands on the caller's path (enqueue, withdraw, publish, revoke). With no
 *   offline queue a command while Redis is down fails at once, so a call answers Unavailable
 *   instead of hanging until Redis returns.
 * - `patient`: the subscriber and the workers' connections. Their commands wait for the
 *   reconnect (BullMQ's blocking fetch needs `maxRetriesPerRequest: null`), and ioredis
 *   re-subscribes after it.
 * Both reconnect forever, at most a second apart, so the bus recovers by itself soon after
 * Redis does (BullMQ's own default backs off to 20 s).
 */
import type { Socket } from 'node:net';
import Redis, { RedisOptions } from 'ioredis';
import type { Logger } from '../log';

export type RedisClient = Redis;

const RECONNECT_MAX_MS = 1000;
const retryStrategy = (times: number) => Math.min(times * 100, RECONNECT_MAX_MS);

/**
 * The commands a client sends in one callback of the event loop (with the promise reactions it
 * sets off) leave in one socket write: ioredis writes each command by itself, and every write to
 * Redis's socket is a system call that wakes Redis, whose answers then come back in as many
 * reads. A call's end sends a reply and BullMQ's completion together, a gateway's turn the
 * releases and enqueues of every call it finished or started. Unlike ioredis's auto-pipelining
 * (measured slower: bench/results/2026-11-22-hotpath-fixes.md), no command waits for a later
 * turn: the socket is corked at the first write and uncorked by a next-tick callback, which
 * runs as soon as the current callback and its microtasks are done.
 */
export function coalesceWrites(client: Redis): Redis {
  client.on('connect', () => {
    const socket = client.stream as Socket | undefined;
    if (!socket || typeof socket.cork !== 'function' || coalesced.has(socket)) return;
    coalesced.add(socket);
    const write = socket.write;
    let corked = false;
    const uncork = () => {
      corked = false;
      socket.uncork();
    };
    socket.write = function (this: Socket, ...args: Parameters<Socket['write']>) {
      if (!corked) {
        corked = true;
        socket.cork();
        process.nextTick(uncork);
      }
      return write.apply(this, args);
    } as Socket['write'];
  });
  return client;
}
const coalesced = new WeakSet<Socket>();

export function failFastConnection(url: string, name: string): Redis {
  return new Redis(url, {
    connectionName: name,
    enableOfflineQueue: false,
    // A command in flight when the connection drops fails instead of being replayed later.
    autoResendUnfulfilledCommands: false,
    maxRetriesPerRequest: 0,
    retryStrategy,
  } satisfies RedisOptions);
}

export function patientConnection(url: string, name: string): Redis {
  return new Redis(url, { connectionName: name, maxRetriesPerRequest: null, retryStrategy } satisfies RedisOptions);
}

/**
 * A patient connection and every copy made of it (BullMQ duplicates a worker's connection for
 * its blocking fetch), which can all be ended even while Redis is unreachable. ioredis's
 * `disconnect()` leaves a reconnecting client parked forever, its queued commands pending, and
 * BullMQ's `Worker.close()` then waits for its 'end' forever (keeping a timer alive). Ended
 * this way instead, each client gives up at its next reconnect attempt, emits 'end' and fails
 * its queued commands.
 */
export class ConnectionFamily {
  readonly root: Redis;
  private readonly members: Redis[] = [];
  private ending = false;

  constructor(url: string, name: string) {
    const strategy = (times: number) => (this.ending ? null : retryStrategy(times));
    this.root = new Redis(url, { connectionName: name, maxRetriesPerRequest: null, retryStrategy: strategy } satisfies RedisOptions);
    this.members.push(this.root);
    const duplicate = this.root.duplicate.bind(this.root);
    this.root.duplicate = ((override?: Partial<RedisOptions>) => {
      const copy = duplicate(override);
      this.members.push(copy);
      return copy;
    }) as Redis['duplicate'];
  }

  get up(): boolean {
    return this.root.status === 'ready';
  }

  /** Stops reconnecting; resolves once every member that is not connected has ended (at most `timeoutMs`). */
  async endDisconnected(timeoutMs: number): Promise<void> {
    this.ending = true;
    const until = Date.now() + timeoutMs;
    while (this.members.some((m) => m.status !== 'end' && m.status !== 'ready') && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

/** The URL without its password, for messages and logs. */
export function redactUrl(url: string): string {
  return url.replace(/\/\/[^@/]*@/, '//***@');
}

/** Resolves when `client` is ready; rejects with a sentence after `timeoutMs`. */
export function waitReady(client: Redis, url: string, timeoutMs: number): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    let lastError = '';
    const onError = (err: Error) => (lastError = err.message);
    const onReady = () => {
      clearTimeout(timer);
      client.off('error', onError);
      resolve();
    };
    const timer = setTimeout(() => {
      client.off('ready', onReady);
      client.off('error', onError);
      reject(
        new Error(
          `cannot reach Redis at ${redactUrl(url)} within ${timeoutMs} ms${lastError ? ` (${lastError})` : ''}; is TOOLGATE_REDIS_URL right and Redis running?`,
        ),
      );
    }, timeoutMs);
    client.once('ready', onReady);
    client.on('error', onError);
  });
}

/**
 * Logs each connection's losses and recoveries once (not every reconnect attempt), and keeps
 * ioredis from printing "Unhandled error event".
 */
const closing = new WeakSet<Redis>();

export function watchConnection(client: Redis, label: string, log: Logger): void {
  let down = false;
  client.on('error', (err: Error) => {
    if (!down) log.debug({ connection: label, err: err.message }, 'redis connection error');
  });
  client.on('close', () => {
    if (!down && !closing.has(client)) log.warn({ connection: label }, 'lost the connection to Redis; reconnecting');
    down = true;
  });
  client.on('ready', () => {
    if (down) log.info({ connection: label }, 'reconnected to Redis');
    down = false;
  });
}

/** QUIT if connected, else just drop the socket; never throws. */
export async function closeConnection(client: Redis): Promise<void> {
  if (client.status === 'end') return;
  closing.add(client);
  if (client.status === 'ready') {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([client.quit(), new Promise((r) => (timer = setTimeout(r, 1000)))]);
    } catch {
      // fall through to disconnect
    } finally {
      clearTimeout(timer);
    }
  }
  client.disconnect(false);
}

/** `promise`, or a rejection once `ms` have passed. */
export function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
