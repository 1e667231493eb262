/**
 * The node flags `toolgate serve` is started with: the service image's CMD, the gateway in
 * docker-compose.yml and `npm start` spell them out, and test/bin/launch.test.ts checks that
 * they agree with this list (the bench starts serve with it too). V8's defaults give the young
 * generation 2 × 16 MiB and let the old one grow by up to 4× before a major GC; under 64 busy
 * callers that put the gateway at 125–170 MiB RSS. With these, 2 × 4 MiB and a major GC once the
 * old generation is 20 % (at least 8 MiB) past what the last one left: under 100 MiB, for more
 * gateway CPU per call on the Redis path (bench/results/2026-11-24-gateway-memory.md).
 *
 * Only serve: `executor` and `stdio` have CPU targets and no memory one, and the bin's #! line
 * cannot tell the commands apart (these flags must be given when node starts).
 */
export const SERVE_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=4', '--heap-growing-percent=20'];
