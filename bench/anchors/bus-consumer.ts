/**
 * The far side of the bus-only comparison: toolgate's Bus (the built product) consuming with a
 * trivial handler — no sandbox, no tools — concurrency 16 like the executor's default.
 *
 *   node bus-consumer.js REDIS_URL
 */
import { productBus } from '../lib/bus';

async function main(): Promise<void> {
  const bus = await productBus(process.argv[2]!);
  const consumer = await bus.consume(async () => ({ content: [{ type: 'text', text: 'ok' }] }), { concurrency: 16 });
  process.stderr.write('consumer ready\n');
  process.once('SIGTERM', () => {
    void consumer
      .close(1000)
      .then(() => bus.close())
      .then(() => process.exit(0));
  });
}

void main();
