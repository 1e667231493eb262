/**
 * BullMQ's Queue, Job and Worker, loaded from their own files rather than from the package's
 * index. The index also loads what the bus never uses — the PostgreSQL backend (its SQL text
 * alone is 250 KiB), the flow producer, QueueEvents, the relays, the Valkey Glide client: 70
 * modules whose source and code stay resident in every gateway and executor (~1 MiB of V8 heap,
 * 2–3 MiB RSS; bench/results/2026-11-24-gateway-memory.md). Types still come from the index,
 * which `import type` never loads. bullmq has no `exports` map, so these paths resolve; the
 * module-graph test (test/bin) fails if the index is loaded again.
 */
import type * as BullMQ from 'bullmq';

/* eslint-disable @typescript-eslint/no-require-imports */
export const Queue = (require('bullmq/dist/cjs/classes/queue') as { Queue: typeof BullMQ.Queue }).Queue;
export const Job = (require('bullmq/dist/cjs/classes/job') as { Job: typeof BullMQ.Job }).Job;
export const Worker = (require('bullmq/dist/cjs/classes/worker') as { Worker: typeof BullMQ.Worker }).Worker;
/* eslint-enable @typescript-eslint/no-require-imports */

export type Queue<DataType = unknown> = BullMQ.Queue<DataType>;
export type Job<DataType = unknown> = BullMQ.Job<DataType>;
export type Worker<DataType = unknown> = BullMQ.Worker<DataType>;
