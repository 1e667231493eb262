/** MCP 2026-07-28 rules against the in-process server. */
import { describeModernEra } from './mcp-modern';
import { memoryPeer } from './memory-peer';

describeModernEra('in memory', (options) => memoryPeer(options), { tasks: false });
