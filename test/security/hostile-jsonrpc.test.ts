/**
 * Hostile JSON-RPC against every transport: the `toolgate stdio` binary, the HTTP gateway, and
 * the `toolgate shim` binary relaying to that gateway. Parse bombs (not JSON, bad UTF-8, a
 * megabyte of `[`), 100,000 levels of nesting, a body over the limit, an empty batch, a
 * 10,000-element batch (over TOOLGATE_MAX_BATCH, default 1000) and a batch of exactly the limit.
 * Each probe must get the answer JSON-RPC and the README promise, and after each the server
 * still answers `ping`: refused = the answer was right; leaked = the server stopped serving.
 *
 * Limits: the stdio server and the gateway take 1 MiB messages; the shim 4 MiB, so one frame can
 * pass the shim and meet the gateway's 413, and a larger one meets the shim's own limit.
 */
import { loadConfig } from '../../shared/config';
import { call } from '../protocol/wire';
import { ShimProcess } from '../shim/shim-process';
import { until } from '../shim/gateway';
import { StdioServer } from '../stdio/server';
import { AttackGateway, startAttackGateway } from './gateways';
import { tally } from './tally';

const MiB = 1024 * 1024;
const LIMIT = 1 * MiB;
const SHIM_LIMIT = 4 * MiB;
const NEST = 100_000;
/** TOOLGATE_MAX_BATCH as every process here runs it: unset, so the default (1000). */
const DEFAULT_MAX_BATCH = loadConfig({}).protocol.maxBatch;

type Kind = 'stdio' | 'http' | 'shim';

/** What came back for one hostile message: the parsed reply and, over HTTP, the status. */
interface Outcome {
  status?: number;
  reply: any;
}

interface Target {
  /** Sends one message exactly as given (stdio and the shim add the newline) and returns what came back. */
  exchange(raw: string | Buffer): Promise<Outcome>;
  /** Whether the server still answers ping (within a few seconds). */
  serving(): Promise<boolean>;
  close(): Promise<void>;
}

const pad = (bytes: number, id: string) => {
  const head = `{"jsonrpc":"2.0","id":"${id}","method":"ping","params":{"pad":"`;
  const tail = '"}}';
  return head + 'x'.repeat(bytes - head.length - tail.length) + tail;
};
const pings = (n: number) => JSON.stringify(Array.from({ length: n }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'ping' })));
const errorOf = (code: number, id: unknown = null) => ({ jsonrpc: '2.0', id, error: expect.objectContaining({ code }) });
const tooManyElements = {
  jsonrpc: '2.0',
  id: null,
  error: expect.objectContaining({ code: -32600, message: expect.stringContaining('more than 100000 JSON elements') }),
};

interface Probe {
  name: string;
  message: () => string | Buffer;
  /** Throws (a jest expectation) unless `o` is the right answer on this transport. */
  check(o: Outcome, kind: Kind): void;
}

const probes: Probe[] = [
  { name: 'not JSON', message: () => 'this is not json', check: (o) => expect(o.reply).toEqual(errorOf(-32700)) },
  { name: 'truncated JSON', message: () => '{"jsonrpc":"2.0","id":1,"method":"ping"', check: (o) => expect(o.reply).toEqual(errorOf(-32700)) },
  {
    name: 'bytes that are not UTF-8',
    message: () => Buffer.from([0x7b, 0xff, 0xfe, 0xc3, 0x28, 0x7d]),
    check: (o) => expect(o.reply).toEqual(errorOf(-32700)),
  },
  // Over HTTP the gateway counts a body's elements as it arrives (TOOLGATE_MAX_JSON_ELEMENTS,
  // 100000) and refuses these before parsing: -32600, id null. The shim parses its frames itself
  // (-32700 for the unparseable) and addresses the gateway's refusal to the frame's requests.
  {
    name: 'a megabyte of [ never closed',
    message: () => '['.repeat(LIMIT - 64),
    check: (o, kind) => expect(o.reply).toEqual(kind === 'http' ? tooManyElements : errorOf(-32700)),
  },
  {
    name: `${NEST} levels of { never closed`,
    message: () => '{"a":'.repeat(NEST),
    check: (o, kind) => expect(o.reply).toEqual(kind === 'http' ? tooManyElements : errorOf(-32700)),
  },
  {
    // A non-empty array is a batch; its one element (an array) is not a Request object.
    name: `${NEST} nested arrays`,
    message: () => '['.repeat(NEST) + ']'.repeat(NEST),
    check: (o, kind) => expect(o.reply).toEqual(kind === 'stdio' ? [errorOf(-32600)] : tooManyElements),
  },
  {
    name: `${NEST} levels of nesting in a request's arguments`,
    message: () => `{"jsonrpc":"2.0","id":"deep","method":"tools/call","params":{"name":"read_file","arguments":${'{"a":'.repeat(NEST)}1${'}'.repeat(NEST)}}}`,
    check: (o, kind) => expect(o.reply).toEqual(kind === 'http' ? tooManyElements : errorOf(-32600, 'deep')),
  },
  {
    name: 'a body over the limit',
    message: () => pad(LIMIT + 1024, 'big'),
    check: (o, kind) => {
      if (kind === 'http') expect(o.status).toBe(413);
      // The shim passes a frame under its own limit on; the gateway's 413 reaches the request.
      if (kind === 'shim') expect(o.reply).toEqual({ jsonrpc: '2.0', id: 'big', error: expect.objectContaining({ code: -32007, data: { limit: LIMIT } }) });
      else expect(o.reply).toEqual({ jsonrpc: '2.0', id: null, error: expect.objectContaining({ code: -32007, data: { limit: LIMIT } }) });
    },
  },
  {
    name: "a frame over the shim's own limit",
    message: () => pad(SHIM_LIMIT + 1024, 'huge'),
    check: (o, kind) => {
      if (kind === 'http') expect(o.status).toBe(413);
      expect(o.reply).toEqual({
        jsonrpc: '2.0',
        id: null,
        error: expect.objectContaining({ code: -32007, data: { limit: kind === 'shim' ? SHIM_LIMIT : LIMIT } }),
      });
    },
  },
  { name: 'an empty batch', message: () => '[]', check: (o) => expect(o.reply).toEqual(errorOf(-32600)) },
  {
    name: 'a 10,000-element batch',
    message: () => pings(10_000),
    check: (o, kind) => {
      const refusal = { code: -32600, message: expect.stringContaining(`exceeds the limit of ${DEFAULT_MAX_BATCH}`), data: { limit: DEFAULT_MAX_BATCH } };
      if (kind !== 'shim') return expect(o.reply).toEqual({ jsonrpc: '2.0', id: null, error: refusal });
      // The shim owes each request of the frame an answer: the gateway's refusal, addressed to each.
      expect(o.reply).toHaveLength(10_000);
      (o.reply as unknown[]).forEach((r, i) => expect(r).toEqual({ jsonrpc: '2.0', id: i, error: refusal }));
    },
  },
  {
    name: `a batch of exactly ${DEFAULT_MAX_BATCH}`,
    message: () => pings(DEFAULT_MAX_BATCH),
    check: (o) => {
      expect(o.reply).toHaveLength(DEFAULT_MAX_BATCH);
      const ids = (o.reply as Array<{ id: number; result: unknown }>).map((r) => {
        expect(r.result).toEqual({});
        return r.id;
      });
      expect(ids.sort((a, b) => a - b)).toEqual(Array.from({ length: DEFAULT_MAX_BATCH }, (_, i) => i));
    },
  },
];

async function stdioTarget(): Promise<Target> {
  const server = await StdioServer.start({ env: { TOOLGATE_MAX_MESSAGE_BYTES: String(LIMIT) } });
  return {
    async exchange(raw) {
      await server.write(raw);
      await server.write('\n');
      return { reply: await server.next(15_000) };
    },
    serving: async () => (await call(server, 'ping', undefined, 5000).catch(() => undefined))?.result !== undefined,
    close: () => server.close(),
  };
}

async function httpTarget(gw: AttackGateway): Promise<Target> {
  const token = gw.token({ id: 'hostile-http' });
  const post = async (body: string | Buffer): Promise<Outcome> => {
    const res = await fetch(gw.url, { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` }, body });
    const text = await res.text();
    return { status: res.status, reply: text === '' ? undefined : JSON.parse(text) };
  };
  return {
    exchange: post,
    serving: async () => {
      const o = await post('{"jsonrpc":"2.0","id":"alive","method":"ping"}').catch(() => undefined);
      return o?.status === 200 && o.reply?.result !== undefined;
    },
    close: async () => undefined,
  };
}

async function shimTarget(gw: AttackGateway): Promise<Target> {
  const shim = await ShimProcess.start(gw.url, {
    env: {
      TOOLGATE_TOKEN: gw.token({ id: 'hostile-shim' }),
      TOOLGATE_API_KEY: undefined,
      TOOLGATE_LOG_LEVEL: 'warn',
      TOOLGATE_MAX_MESSAGE_BYTES: String(SHIM_LIMIT),
    },
  });
  let read = 0;
  const nextLine = async (timeoutMs: number) => {
    await until(() => (shim.lines.length > read ? true : undefined), 'a line from the shim', timeoutMs);
    return JSON.parse(shim.lines[read++]!) as unknown;
  };
  const write = (raw: string | Buffer) => new Promise<void>((resolve, reject) => shim.child.stdin!.write(raw, (err) => (err ? reject(err) : resolve())));
  return {
    async exchange(raw) {
      await write(raw);
      await write('\n');
      return { reply: await nextLine(15_000) };
    },
    serving: async () => {
      if (shim.child.exitCode !== null || shim.child.signalCode !== null) return false;
      await write('{"jsonrpc":"2.0","id":"alive","method":"ping"}\n');
      const reply = (await nextLine(5000).catch(() => undefined)) as { id?: unknown; result?: unknown } | undefined;
      return reply?.id === 'alive' && reply.result !== undefined;
    },
    close: () => shim.close(),
  };
}

function hostileSet(kind: Kind, start: () => Promise<Target>): void {
  const set = `hostile-jsonrpc[${kind}]`;
  let target: Target;
  beforeAll(async () => {
    target = await start();
  }, 30_000);
  afterAll(async () => {
    await target?.close();
  });

  test.each(probes.map((p) => [p.name, p] as const))(
    '%s: the right answer, and ping still works',
    async (_name, probe) => {
      let wrong: unknown;
      try {
        probe.check(await target.exchange(probe.message()), kind);
      } catch (err) {
        wrong = err;
      }
      const serving = await target.serving();
      tally.probe(set, wrong === undefined && serving, !serving);
      if (wrong) throw wrong;
      expect(serving).toBe(true);
    },
    30_000,
  );
}

describe('hostile JSON-RPC: toolgate stdio', () => hostileSet('stdio', stdioTarget));

describe('hostile JSON-RPC over HTTP, direct and through the shim', () => {
  let gw: AttackGateway;
  beforeAll(async () => {
    gw = await startAttackGateway('in-process', { TOOLGATE_MAX_MESSAGE_BYTES: String(LIMIT) });
  }, 30_000);
  afterAll(async () => {
    await gw?.close();
  });

  describe('the gateway', () => hostileSet('http', () => httpTarget(gw)));
  describe('toolgate shim → the gateway', () => hostileSet('shim', () => shimTarget(gw)));
});
