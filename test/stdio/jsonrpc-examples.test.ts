/** The JSON-RPC 2.0 specification's examples against the real `toolgate stdio` binary. */
import { describeJsonRpcExamples } from '../protocol/jsonrpc-examples';
import { StdioServer } from './server';

describeJsonRpcExamples('stdio binary', (options) => StdioServer.start(options));
