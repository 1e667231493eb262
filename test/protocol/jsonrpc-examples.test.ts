/** The JSON-RPC 2.0 specification's examples against the in-process server (Dispatcher + Session). */
import { describeJsonRpcExamples } from './jsonrpc-examples';
import { memoryPeer } from './memory-peer';

describeJsonRpcExamples('in memory', (options) => memoryPeer(options));
