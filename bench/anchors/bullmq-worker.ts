/**
 * The other process of the bare BullMQ anchor: a Worker with a trivial handler (returns a small
 * object at once), concurrency 16 as the executor's default, on the given Redis and queue.
 *
 *   node bullmq-worker.js REDIS_URL QUEUE CONCURRENCY
 */
import { Worker } from 'bullmq';

const [url, queue, concurrency] = process.argv.slice(2) as [string, string, string];
const { hostname, port } = new URL(url);
const worker = new Worker(queue, async (job) => ({ ok: true, n: (job.data as { n?: number }).n ?? 0 }), {
  connection: { host: hostname, port: Number(port), maxRetriesPerRequest: null },
  concurrency: Number(concurrency) || 16,
});
void worker.waitUntilReady().then(() => process.stderr.write('worker ready\n'));
process.once('SIGTERM', () => {
  void worker.close().then(() => process.exit(0));
});
