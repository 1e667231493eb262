/**
 * http-oauth: the OAuth endpoint's cost. One `toolgate serve` (embedded executor, bwrap so two
 * tenants can share it) with TOOLGATE_OAUTH_ISSUERS naming a local issuer: sequential
 * tools/call read_file (1 KiB) on `POST /mcp` with an ES256 access token, against the same call
 * on `POST /` with the spec's HS256 token, alternated in the same run. The issuer's keys are
 * fetched once; the verified-token caches of both endpoints are warm (issue 25: p50 ≤ 1.05×).
 *
 * Each side calls as TENANTS identities in turn, each with its own bwrap sandbox: two single
 * sandboxes of the same kind differ by up to ±10 % in one run (where the kernel happens to run
 * their agents against the gateway), which is more than the endpoints differ by. Spreading each
 * side over several sandboxes compares the endpoints, not one sandbox's placement with another's.
 */
import { alternate } from './lib/alternate';
import { canRunBwrap } from './lib/availability';
import { FILE_1K } from './lib/fixtures';
import { rpcClient } from './lib/http-client';
import { startBenchIssuer } from './lib/oauth-issuer';
import { sequential } from './lib/plan';
import { startToolgate } from './lib/toolgate';
import type { Benchmark, BenchContext, Row } from './lib/types';

/** Identities per side, each with its own sandbox (see above). */
const TENANTS = 4;
const FILE_TEXT = 'The quick brown fox jumps over the lazy dog. 0123456789 abcdefghij\n'.repeat(16).slice(0, 1024);

export const httpOAuthBench: Benchmark = {
  name: 'http-oauth',
  title: 'HTTP: the OAuth endpoint (/mcp, ES256 access token) vs POST / (HS256 token), same gateway',
  unavailable: () => canRunBwrap(),
  async run(ctx: BenchContext): Promise<Row[]> {
    const issuer = await startBenchIssuer();
    const stack = await startToolgate({ sandbox: 'bwrap', env: { TOOLGATE_OAUTH_ISSUERS: issuer.issuer, TOOLGATE_WORKSPACE_QUOTA_BYTES: '0' } });
    const mcp = `${stack.url}mcp`;
    const ids = Array.from({ length: TENANTS }, (_, i) => `bench-oauth-${i + 1}`);
    const oauth = await Promise.all(
      ids.map(async (id) => rpcClient(mcp, { authorization: `Bearer ${await issuer.token(mcp, id, 'file:read file:write')}` }, 1)),
    );
    const hs256 = ids.map((id) => rpcClient(stack.url, { authorization: `Bearer ${stack.tokenFor(id)}` }, 1));
    let o = 0;
    let h = 0;
    try {
      for (const client of [...oauth, ...hs256]) await client.call('write_file', { path: FILE_1K, content: FILE_TEXT });
      const options = { ...sequential(ctx), warmup: ctx.quick ? 1500 : 3000 };
      ctx.log(`http-oauth: ${options.calls} calls per side`);
      const results = await alternate(
        [
          { label: 'POST /mcp, ES256 access token', call: () => oauth[o++ % TENANTS]!.call('read_file', { path: FILE_1K }), pids: () => [stack.gateway.pid] },
          { label: 'POST /, HS256 token', call: () => hs256[h++ % TENANTS]!.call('read_file', { path: FILE_1K }), pids: () => [stack.gateway.pid] },
        ],
        options,
      );
      const [ours, theirs] = [results[0]!, results[1]!];
      return [
        {
          bench: 'http-oauth',
          case: 'read_file 1 KiB over HTTP, sequential',
          ours: { label: 'OAuth endpoint /mcp (ES256, keys cached)', summary: ours },
          theirs: { label: 'POST / (HS256)', summary: theirs },
          concurrency: 1,
          target: { metric: 'p50-ratio', op: '<=', value: 1.05 },
          note: `same gateway process, bwrap sandboxes; each side calls as ${TENANTS} tenants in turn (its own sandbox each); RSS is the shared gateway`,
        },
      ];
    } finally {
      for (const client of [...oauth, ...hs256]) await client.close();
      await stack.close();
      await issuer.close();
    }
  },
};
