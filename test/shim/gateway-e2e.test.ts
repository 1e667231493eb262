/**
 * The shim in front of the real gateway (createGateway on a loopback socket, the in-process bus,
 * an executor running each tenant's tools in a `none` sandbox): the official SDK client spawns
 * the shim over stdio and works a tenant's files and commands; a bad token gets the gateway's
 * own -32008 addressed to the request; a cancelled call is abandoned all the way to the executor.
 */
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ErrorCode } from '../../shared/protocol/errors';
import { startTestGateway, TestGateway } from '../gateway/harness';
import { until } from './gateway';
import { BIN, ShimProcess } from './shim-process';

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(async () => {
  await gw?.close();
});

test('the SDK client over the shim: connect, list, write, read, run — in the tenant of the token', async () => {
  const token = gw.token({ id: 'shim-user' });
  let stderr = '';
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [BIN, 'shim', '--url', gw.url],
    env: { ...getDefaultEnvironment(), TOOLGATE_TOKEN: token, TOOLGATE_LOG_LEVEL: 'debug' },
    stderr: 'pipe',
  });
  transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const client = new Client({ name: 'toolgate-shim-gateway-e2e', version: '1.0.0' });
  await client.connect(transport);
  try {
    expect(client.getServerVersion()).toMatchObject({ name: 'toolgate' });
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(['read_file', 'write_file', 'run_command']));

    const write = await client.callTool({ name: 'write_file', arguments: { path: 'via-shim.txt', content: 'through the shim ☃\n' } });
    expect(write.isError).toBeFalsy();
    expect(await fs.readFile(path.join(gw.workspaceOf('shim-user'), 'via-shim.txt'), 'utf8')).toBe('through the shim ☃\n');

    const read = await client.callTool({ name: 'read_file', arguments: { path: 'via-shim.txt' } });
    expect(read.structuredContent).toMatchObject({ content: 'through the shim ☃\n' });

    const run = await client.callTool({ name: 'run_command', arguments: { command: 'cat via-shim.txt; exit 3' } });
    expect(run.isError).toBeFalsy();
    expect(run.structuredContent).toMatchObject({ exitCode: 3, stdout: 'through the shim ☃\n' });
  } finally {
    await client.close();
  }
  expect(stderr).not.toContain(token);
});

test("a bad token: the gateway's 401 error reaches the agent with the request's own id", async () => {
  const shim = await ShimProcess.start(gw.url, { env: { TOOLGATE_TOKEN: gw.token({}, 'another-secret-entirely-0123456789') } });
  try {
    await shim.send({ jsonrpc: '2.0', id: 41, method: 'tools/list' });
    const reply = await shim.reply(41);
    expect(reply.error?.code).toBe(ErrorCode.Unauthenticated);
    expect(reply.error?.message).toMatch(/^Unauthenticated: /);
  } finally {
    await shim.close();
  }
});

test('notifications/cancelled: the POST is abandoned, the gateway aborts the running call, no reply is written', async () => {
  const token = gw.token({ id: 'shim-cancel' });
  const shim = await ShimProcess.start(gw.url, { env: { TOOLGATE_TOKEN: token } });
  try {
    await shim.send({ jsonrpc: '2.0', id: 'long', method: 'tools/call', params: { name: 'run_command', arguments: { command: 'sleep 30' } } });
    const started = await until(() => gw.events.find((e) => e.type === 'job.started' && e.tenant === 'shim-cancel'), 'the job to start');
    await shim.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'long', reason: 'changed my mind' } });
    const jobId = (started as { jobId: string }).jobId;
    // Ended well before the command's 30 s: the cancellation reached the executor.
    await until(() => gw.events.find((e) => (e.type === 'job.failed' || e.type === 'job.completed') && e.jobId === jobId), 'the job to end', 15_000);
    await shim.send({ jsonrpc: '2.0', id: 'after', method: 'ping' });
    expect((await shim.reply('after')).result).toEqual({});
    expect(await shim.endInput()).toEqual({ code: 0, signal: null });
    expect(shim.replies).toEqual([{ jsonrpc: '2.0', id: 'after', result: {} }]);
    expect(shim.stderr).not.toContain(token);
  } finally {
    await shim.close();
  }
});
