/**
 * The SDK 2.x client contract through `toolgate shim` (spawned by the client over stdio, as an
 * agent would) to `toolgate serve` with its embedded executor: the shim must carry each modern
 * request's headers (MCP-Protocol-Version, Mcp-Method, Mcp-Name) from its body.
 */
import { sdk2ClientContract } from './sdk2-client.suite';
import { shimDeployment, startServe } from './sdk2-http';

sdk2ClientContract('toolgate shim to toolgate serve (embedded bus)', async (settings) => shimDeployment(await startServe(settings)));
