/**
 * http-oauth: the OAuth endpoint's cost. One `toolgate serve` (embedded executor, bwrap so two
 * tenants can share it) with TOOLGATE_OAUTH_ISSUERS naming a local issuer: sequential
 * tools/call read_file (1 KiB) on `POST /mcp` with an ES256 access token, against the same call
 * on `POST /` with the spec's HS256 token, alternated in the same run. The issuer's keys are
 * fetched once; the verified-token caches of both endpoints are warm (issue 25: p50 ≤ 1.05×).
 */
import { alternate } from './lib/alternate';
import { canRunBwrap } from './lib/availability';
import { FILE_1K } from './lib/fixtures';
import { rpcClient } from './lib/http-client';
import { startBenchIssuer } from './lib/oauth-issuer';
import { sequential } from './lib/plan';
import { startToolgate } from './lib/toolgate';
import type { Benchmark, BenchContext, Row } from './lib/types';

const FILE_TEXT = 'The quick brown fox jumps over the lazy dog. 0123456789 abcdefghij\n'.repeat(16).slice(0, 1024);

export const httpOAuthBench: Benchmark = {
  name: 'http-oauth',
  title: 'HTTP: the OAuth endpoint (/mcp, ES256 access token) vs POST / (HS256 token), same gateway',
  unavailable: () => canRunBwrap(),
  async run(ctx: BenchContext): Promise<Row[]> {
    const issuer = await startBenchIssuer();
    const stack = await startToolgate({ sandbox: 'bwrap', env: { TOOLGATE_OAUTH_ISSUERS: issuer.issuer, TOOLGATE_WORKSPACE_QUOTA_BYTES: '0' } });
    const mcp = `${stack.url}mcp`;
    const token = await issuer.token(mcp, 'bench-oauth', 'file:read file:write');
    const oauth = rpcClient(mcp, { authorization: `Bearer ${token}` }, 1);
    const hs256 = stack.client(1);
    try {
      await oauth.call('write_file', { path: FILE_1K, content: FILE_TEXT });
      const options = { ...sequential(ctx), warmup: ctx.quick ? 1500 : 3000 };
      ctx.log(`http-oauth: ${options.calls} calls per side`);
      const [o, h] = await alternate(
        [
          { label: 'POST /mcp, ES256 access token', call: () => oauth.call('read_file', { path: FILE_1K }), pids: () => [stack.gateway.pid] },
          { label: 'POST /, HS256 token', call: () => stack.readFile(hs256), pids: () => [stack.gateway.pid] },
        ],
        options,
      );
      return [
        {
          bench: 'http-oauth',
          case: 'read_file 1 KiB over HTTP, sequential',
          ours: { label: 'OAuth endpoint /mcp (ES256, keys cached)', summary: o! },
          theirs: { label: 'POST / (HS256)', summary: h! },
          concurrency: 1,
          target: { metric: 'p50-ratio', op: '<=', value: 1.05 },
          note: 'same gateway process, bwrap sandboxes, one tenant per endpoint; RSS is the shared gateway',
        },
      ];
    } finally {
      await oauth.close();
      await hs256.close();
      await stack.close();
      await issuer.close();
    }
  },
};
