/** MCP 2026-07-28 rules against the real `toolgate stdio` binary. */
import { describeModernEra } from '../protocol/mcp-modern';
import { StdioServer } from './server';

describeModernEra('stdio binary', (options) => StdioServer.start(options), { tasks: true });
