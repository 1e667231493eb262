/**
 * The SSRF guard, end to end through http_request, using only loopback listeners.
 *
 * Tripwires are raw TCP listeners on 127.0.0.1 and ::1 that count connections: every refusal
 * here must happen before a single connection (so before a single byte) reaches them. One
 * allow-listed HTTP server proves the guard still lets the operator's exceptions through, and
 * its redirects prove every hop is checked. Private and public ranges are never contacted; they
 * are covered by the pure classification tests in test/tools/http/.
 */
import type { ToolResult } from '../../shared/tools/tool';
import { callHttp, CallOptions, httpServer, ipv6LoopbackAvailable, outputOf, TestServer, textOf, Tripwire, tripwire } from '../tools/http/loopback';
import { tally } from './tally';

let v4: Tripwire;
let v6: Tripwire | undefined;
let allowed: TestServer;
let allow: string[];

beforeAll(async () => {
  v4 = await tripwire('127.0.0.1');
  if (await ipv6LoopbackAvailable()) v6 = await tripwire('::1');
  else console.warn('ssrf.test: IPv6 loopback (::1) is unavailable on this machine; the ::1 listener cases are skipped');
  allowed = await httpServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname === '/redirect') {
      res.writeHead(302, { location: url.searchParams.get('to') ?? '/' });
      res.end();
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('allowed server');
  });
  allow = [`127.0.0.1:${allowed.port}`];
});

afterAll(async () => {
  await v4.close();
  await v6?.close();
  await allowed.close();
});

afterEach(() => {
  // The point of the suite: nothing ever reached a forbidden listener.
  expect(v4.connections).toBe(0);
  expect(v4.bytes).toBe(0);
  expect(v6?.connections ?? 0).toBe(0);
});

/**
 * One SSRF probe, counted for the attack summary: refused when the guard refused it, leaked when
 * a forbidden listener saw a connection meanwhile. The tests' own assertions stay as they were.
 */
async function attack(args: Record<string, unknown>, options: CallOptions): Promise<ToolResult> {
  const reached = () => v4.connections + (v6?.connections ?? 0);
  const before = reached();
  const result = await callHttp(args, options);
  await new Promise((resolve) => setImmediate(resolve)); // a connection that got through is counted by now
  tally.probe('ssrf', result.isError === true && /^(Refused: |Only http and https)/.test(textOf(result)), reached() > before);
  return result;
}

const HINT = 'which is not allowed; operators can allow it with TOOLGATE_HTTP_ALLOW';

/** Every way of writing the IPv4 loopback listener's address, each with the port appended. */
const v4Spellings = (port: number): Array<[string, string]> => [
  [`http://127.0.0.1:${port}/`, `Refused: 127.0.0.1 (loopback) is not allowed`],
  [`http://2130706433:${port}/`, 'Refused: 127.0.0.1 (loopback)'],
  [`http://0x7f000001:${port}/`, 'Refused: 127.0.0.1 (loopback)'],
  [`http://0x7F.0x0.0x0.0x1:${port}/`, 'Refused: 127.0.0.1 (loopback)'],
  [`http://0177.0.0.1:${port}/`, 'Refused: 127.0.0.1 (loopback)'],
  [`http://017700000001:${port}/`, 'Refused: 127.0.0.1 (loopback)'],
  [`http://127.1:${port}/`, 'Refused: 127.0.0.1 (loopback)'],
  [`http://127.0.1:${port}/`, 'Refused: 127.0.0.1 (loopback)'],
  [`http://0x7f.1:${port}/`, 'Refused: 127.0.0.1 (loopback)'],
  [`http://127.0.0.1.:${port}/`, 'Refused: 127.0.0.1 (loopback)'],
  [`http://%31%32%37.0.0.1:${port}/`, 'Refused: 127.0.0.1 (loopback)'],
  [`https://127.0.0.1:${port}/`, 'Refused: 127.0.0.1 (loopback)'],
  [`http://[::ffff:127.0.0.1]:${port}/`, 'Refused: ::ffff:7f00:1 (loopback, as IPv4-mapped 127.0.0.1)'],
  [`http://[::ffff:7f00:1]:${port}/`, 'Refused: ::ffff:7f00:1 (loopback, as IPv4-mapped 127.0.0.1)'],
  [`http://[0:0:0:0:0:ffff:7f00:0001]:${port}/`, 'Refused: ::ffff:7f00:1 (loopback, as IPv4-mapped 127.0.0.1)'],
  [`http://localhost:${port}/`, `Refused: localhost resolves to 127.0.0.1 (loopback), ${HINT}`],
  [`http://LOCALHOST:${port}/`, 'Refused: localhost resolves to 127.0.0.1 (loopback)'],
  [`http://localhost.:${port}/`, 'Refused: localhost resolves to 127.0.0.1 (loopback)'],
  [`http://0.0.0.0:${port}/`, 'Refused: 0.0.0.0 (unspecified ("this network")) is not allowed'],
  [`http://0:${port}/`, 'Refused: 0.0.0.0 (unspecified'],
];

describe('refused before any byte reaches the 127.0.0.1 listener', () => {
  it.each(v4Spellings(0).map(([url], i) => [url.replace(':0/', ':PORT/'), i] as const))('%s', async (_shown, i) => {
    const [url, message] = v4Spellings(v4.port)[i] as [string, string];
    const result = await attack({ url }, { allow });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toContain(message);
    expect(textOf(result)).toContain('TOOLGATE_HTTP_ALLOW');
  });
});

describe('refused before any byte reaches the ::1 listener', () => {
  const spellings = ['[::1]', '[0:0:0:0:0:0:0:1]', '[0000:0000::0001]', '[::0:1]', '[::]', '[0::0]'];
  it.each(spellings)('http://%s:PORT/', async (host) => {
    if (!v6) return; // reason printed in beforeAll
    const result = await attack({ url: `http://${host}:${v6.port}/` }, { allow });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/^Refused: ::1? \((loopback|unspecified)\) is not allowed/);
  });
});

describe('the allow-listed server', () => {
  it('works, through its 127.0.0.1:PORT entry', async () => {
    const out = outputOf(await callHttp({ url: `${allowed.url}/` }, { allow }));
    expect(out).toMatchObject({ status: 200, body: 'allowed server' });
  });

  it('opens only its own port: the same address on the tripwire port stays refused', async () => {
    const result = await attack({ url: `http://127.0.0.1:${v4.port}/` }, { allow });
    expect(textOf(result)).toContain('Refused: 127.0.0.1 (loopback)');
  });

  it.each([
    ['127.0.0.1', (p: number) => `http://127.0.0.1:${p}/`, 'Refused: 127.0.0.1 (loopback)'],
    ['decimal', (p: number) => `http://2130706433:${p}/`, 'Refused: 127.0.0.1 (loopback)'],
    ['localhost', (p: number) => `http://localhost:${p}/secret`, 'Refused: localhost resolves to 127.0.0.1 (loopback)'],
    ['v4-mapped', (p: number) => `http://[::ffff:127.0.0.1]:${p}/`, 'loopback, as IPv4-mapped 127.0.0.1'],
    ['0.0.0.0', (p: number) => `http://0.0.0.0:${p}/`, 'Refused: 0.0.0.0'],
    ['relative', (p: number) => `//127.0.0.1:${p}/`, 'Refused: 127.0.0.1 (loopback)'],
  ])('redirecting to the forbidden port (%s) is refused on that hop', async (_name, target, message) => {
    const before = allowed.seen.length;
    const result = await attack({ url: `${allowed.url}/redirect?to=${encodeURIComponent(target(v4.port))}` }, { allow });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toContain(message);
    expect(allowed.seen.length).toBe(before + 1); // the allowed hop did happen
  });

  it('redirecting to ::1 is refused on that hop', async () => {
    if (!v6) return; // reason printed in beforeAll
    const result = await attack({ url: `${allowed.url}/redirect?to=${encodeURIComponent(`http://[::1]:${v6.port}/`)}` }, { allow });
    expect(textOf(result)).toContain('Refused: ::1 (loopback)');
  });

  it('redirecting to a non-HTTP scheme is refused', async () => {
    const result = await attack({ url: `${allowed.url}/redirect?to=${encodeURIComponent(`gopher://127.0.0.1:${v4.port}/`)}` }, { allow });
    expect(textOf(result)).toContain('Only http and https URLs are supported');
  });
});

describe('names are checked by the address they resolve to, at connect time', () => {
  // A resolver that answers for test names only: no real DNS query is ever made here.
  const resolve = async (host: string) => {
    if (host === 'rebound.test') return [{ address: '127.0.0.1', family: 4 }];
    if (host === 'rebound6.test') return [{ address: '::1', family: 6 }];
    if (host === 'mapped.test') return [{ address: '::ffff:127.0.0.1', family: 6 }];
    throw Object.assign(new Error(`ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
  };

  it.each(['rebound.test', 'mapped.test'])('%s → loopback is refused', async (name) => {
    const result = await attack({ url: `http://${name}:${v4.port}/` }, { allow, resolve });
    expect(textOf(result)).toMatch(new RegExp(`^Refused: ${name.replace('.', '\\.')} resolves to \\S+ \\(loopback`));
  });

  it('rebound6.test → ::1 is refused', async () => {
    if (!v6) return; // reason printed in beforeAll
    const result = await attack({ url: `http://rebound6.test:${v6.port}/` }, { allow, resolve });
    expect(textOf(result)).toContain('Refused: rebound6.test resolves to ::1 (loopback)');
  });

  it('a redirect to such a name is refused too', async () => {
    const result = await attack({ url: `${allowed.url}/redirect?to=${encodeURIComponent(`http://rebound.test:${v4.port}/`)}` }, { allow, resolve });
    expect(textOf(result)).toContain('Refused: rebound.test resolves to 127.0.0.1 (loopback)');
  });

  it('a metadata host name is refused without a DNS query', async () => {
    const asked: string[] = [];
    const result = await attack(
      { url: 'http://metadata.google.internal/computeMetadata/v1/' },
      {
        allow,
        resolve: async (host) => {
          asked.push(host);
          return [];
        },
      },
    );
    expect(textOf(result)).toContain('Refused: metadata.google.internal is a cloud metadata host name');
    expect(asked).toEqual([]);
  });
});
