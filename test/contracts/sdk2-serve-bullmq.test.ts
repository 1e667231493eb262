/**
 * The SDK 2.x client contract over HTTP against `toolgate serve` on BullMQ with a real Redis and
 * a separate `toolgate executor` process: every call crosses Redis to another process and back.
 * Without redis-server the suite is skipped with the reason outside CI and fails in CI.
 */
import { describeRedis, startRedis, TestRedis } from '../helpers/redis';
import { sdk2ClientContract } from './sdk2-client.suite';
import { httpDeployment, startServe } from './sdk2-http';

describeRedis('SDK 2.x client on BullMQ', () => {
  let redis: TestRedis | undefined;
  afterAll(async () => {
    await redis?.close();
  });

  sdk2ClientContract('toolgate serve + toolgate executor on BullMQ (real Redis) over HTTP', async (settings) => {
    redis = await startRedis();
    return httpDeployment(await startServe(settings, redis));
  });
});
