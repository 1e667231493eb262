/** MCP lifecycle and tools/call refusals against the real `toolgate stdio` binary (`--permissions` for the limited caller). */
import { describeMcpLifecycle } from '../protocol/mcp-lifecycle';
import { StdioServer } from './server';

describeMcpLifecycle('stdio binary', (options) => StdioServer.start(options));
