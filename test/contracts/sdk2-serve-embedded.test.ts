/** The SDK 2.x client contract over HTTP against `toolgate serve` with its embedded executor (in-process bus). */
import { sdk2ClientContract } from './sdk2-client.suite';
import { httpDeployment, startServe } from './sdk2-http';

sdk2ClientContract('toolgate serve (embedded bus) over HTTP', async (settings) => httpDeployment(await startServe(settings)));
