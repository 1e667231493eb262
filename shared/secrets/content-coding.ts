/**
 * Content codings on the trusted side's exchanges with a host that has a tenant's secret (the
 * egress proxy and http_request). A value echoed in a compressed body is found only once the
 * body is decoded, so those requests ask only for codings Node's zlib decodes, and a response
 * in any other coding is refused rather than passed on unchecked.
 */
import { Transform, TransformCallback } from 'node:stream';
import * as zlib from 'node:zlib';

type Inner = zlib.Gunzip | zlib.Inflate | zlib.InflateRaw | zlib.BrotliDecompress;

/**
 * Deflate as servers send it: RFC 9110 says zlib-wrapped (RFC 1950), some send raw RFC 1951
 * data. The first two bytes tell them apart: a zlib header's method nibble is 8 and the pair is
 * a multiple of 31.
 */
const inflateEither = (head: Buffer): Inner => {
  const [b0 = 0, b1 = 0] = head;
  const wrapped = head.length >= 2 && (b0 & 0x0f) === 8 && b0 >> 4 <= 7 && ((b0 << 8) | b1) % 31 === 0;
  return wrapped ? zlib.createInflate() : zlib.createInflateRaw();
};

/** The codings a body can be decoded from, by their Content-Encoding token. */
const DECODERS: ReadonlyMap<string, () => Transform> = new Map<string, () => Transform>([
  ['gzip', () => new LazyDecoder(1, () => zlib.createGunzip())],
  ['x-gzip', () => new LazyDecoder(1, () => zlib.createGunzip())],
  ['deflate', () => new LazyDecoder(2, inflateEither)],
  ['br', () => new LazyDecoder(1, () => zlib.createBrotliDecompress())],
]);

const codingOf = (item: string): string => (item.split(';')[0] ?? '').trim().toLowerCase();
const items = (values: readonly string[]): string[] =>
  values
    .flatMap((v) => v.split(','))
    .map((s) => s.trim())
    .filter((s) => s !== '');

/**
 * The Accept-Encoding to send for the client's `values` (none when it sent no header): its
 * entries that name a coding decoded here, in its order with its q-values; `identity` when it
 * named none of them. A request without the header accepts any coding (RFC 9110 §12.5.3), and
 * `*` would let a server pick one we cannot decode (zstd), so neither is passed on. (Such
 * requests carry no Range: a window through a value would escape redaction.)
 */
export function decodableAcceptEncoding(values: readonly string[]): string {
  const kept = items(values).filter((item) => DECODERS.has(codingOf(item)) || codingOf(item) === 'identity');
  return kept.some((item) => DECODERS.has(codingOf(item))) ? kept.join(', ') : 'identity';
}

/**
 * How a body labelled with Content-Encoding `values` is decoded: one decoder factory per coding,
 * the last applied first (`identity` needs none), or the label as written when a coding is not
 * one decoded here.
 */
export function bodyDecoding(values: readonly string[]): { decoders: Array<() => Transform> } | { unsupported: string } {
  const codings = items(values)
    .map(codingOf)
    .filter((c) => c !== 'identity');
  const decoders: Array<() => Transform> = [];
  for (const coding of codings) {
    const make = DECODERS.get(coding);
    if (!make) return { unsupported: values.join(', ').trim() };
    decoders.unshift(make);
  }
  return { decoders };
}

/**
 * Request headers a host with a secret never gets: a range of an echoed value passes redaction
 * (only whole values are found), so windows cut through one would bring it out piece by piece.
 * Without them the server answers the whole body, which is redacted whole.
 */
export const WITHHELD_FROM_SECRET_HOSTS: ReadonlySet<string> = new Set(['range', 'if-range']);

/**
 * The Transfer-Encoding `values` as written when they name a coding other than `chunked` (and
 * `identity`), else undefined. HTTP clients undo `chunked` only, so a body sent with
 * `gzip, chunked` arrives compressed with no Content-Encoding to say so: it cannot be checked.
 */
function uncheckableTransferCoding(values: readonly string[]): string | undefined {
  const other = items(values).some((item) => !['chunked', 'identity'].includes(codingOf(item)));
  return other ? values.join(', ').trim() : undefined;
}

/**
 * What keeps a body from being checked for secrets, as the refusal names it: `transfer-encoding
 * X` (a coding other than chunked: `transferEncoding`'s values) or `content-encoding Y` (a coding
 * `plan`, bodyDecoding's answer for its Content-Encoding, cannot decode); undefined when the body
 * can be checked through `plan`'s decoders.
 */
export function uncheckedCoding(plan: ReturnType<typeof bodyDecoding>, transferEncoding: readonly string[]): string | undefined {
  const transfer = uncheckableTransferCoding(transferEncoding);
  if (transfer !== undefined) return `transfer-encoding ${transfer}`;
  return 'unsupported' in plan ? `content-encoding ${plan.unsupported}` : undefined;
}

/** True when a response has no body to check: HEAD, 1xx, 204, 304, or Content-Length 0. */
export function bodiless(method: string, status: number, contentLength: string | undefined): boolean {
  return method === 'HEAD' || status < 200 || status === 204 || status === 304 || contentLength?.trim() === '0';
}

/**
 * Pipes `stages` one into the next and returns the last (write into the first; at least one).
 * The first error of any stage is handed to `onError` once, and every stage is destroyed.
 */
export function chain(stages: readonly Transform[], onError: (err: Error) => void): Transform {
  let failed = false;
  const fail = (err: Error) => {
    if (failed) return;
    failed = true;
    for (const s of stages) s.destroy();
    onError(err);
  };
  let last: Transform | undefined;
  for (const stage of stages) {
    stage.on('error', fail);
    last = last ? last.pipe(stage) : stage;
  }
  if (!last) throw new Error('chain: no stages');
  return last;
}

/**
 * A decoder made at the body's first bytes (`minHead` of them, or fewer at its end) by `make`,
 * which may look at them: a body of zero bytes is an empty body, where zlib would fail on it
 * ("unexpected end of file"). Output is held back while the reader is full, so a small input
 * cannot fill memory with its expansion.
 */
class LazyDecoder extends Transform {
  private inner: Inner | undefined;
  private head = Buffer.alloc(0);

  constructor(
    private readonly minHead: number,
    private readonly make: (head: Buffer) => Inner,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    if (this.inner) return void this.inner.write(chunk, () => done());
    this.head = Buffer.concat([this.head, chunk]);
    if (this.head.length < this.minHead) return done();
    this.start().write(this.head, () => done());
  }

  override _read(size: number): void {
    this.inner?.resume();
    super._read(size);
  }

  override _flush(done: TransformCallback): void {
    let inner = this.inner;
    if (!inner && this.head.length === 0) return done();
    // A body shorter than minHead never started the decoder; it gets to fail on it now.
    if (!inner) (inner = this.start()).write(this.head);
    inner.once('end', () => done());
    inner.end();
  }

  override _destroy(err: Error | null, done: (error?: Error | null) => void): void {
    this.inner?.destroy();
    done(err);
  }

  private start(): Inner {
    const inner = this.make(this.head);
    inner.on('data', (out: Buffer) => {
      if (!this.push(out)) inner.pause();
    });
    inner.on('error', (err) => this.destroy(err));
    this.inner = inner;
    return inner;
  }
}
