/**
 * JSON-RPC over HTTP from keep-alive connections (undici Pool, one request per connection at a
 * time), the way a busy agent platform would call the gateway. Rejects on a transport error, a
 * non-200, a JSON-RPC error or an isError result.
 */
import { Pool } from 'undici';

export interface RpcHttpClient {
  call(name: string, args: Record<string, unknown>): Promise<unknown>;
  post(body: unknown): Promise<unknown>;
  close(): Promise<void>;
}

export function rpcClient(url: string, headers: Record<string, string>, connections: number): RpcHttpClient {
  const origin = new URL(url);
  const pool = new Pool(origin.origin, { connections, pipelining: 1, keepAliveTimeout: 60_000 });
  let id = 0;
  const post = async (body: unknown) => {
    const res = await pool.request({
      method: 'POST',
      path: origin.pathname,
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
    const text = await res.body.text();
    if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode}: ${text.slice(0, 300)}`);
    const reply = JSON.parse(text) as { error?: unknown; result?: { isError?: boolean } };
    if (reply.error !== undefined) throw new Error(`JSON-RPC error: ${text.slice(0, 300)}`);
    if (reply.result?.isError) throw new Error(`isError: ${text.slice(0, 300)}`);
    return reply.result;
  };
  return {
    post,
    call: (name, args) => post({ jsonrpc: '2.0', id: ++id, method: 'tools/call', params: { name, arguments: args } }),
    close: () => pool.close(),
  };
}
