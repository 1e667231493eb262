/** MCP lifecycle and tools/call refusals against the in-process server. */
import { describeMcpLifecycle } from './mcp-lifecycle';
import { memoryPeer } from './memory-peer';

describeMcpLifecycle('in memory', (options) => memoryPeer(options));
