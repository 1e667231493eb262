/**
 * One compacting full GC right after start-up. Loading the agent's modules leaves dead objects
 * in V8's old space (source text, compile temporaries) that stay resident for the agent's whole
 * life: only scavenges run in an agent (its heap stays below V8's first old-generation limit, so
 * no major GC ever comes, and V8's memory reducer, 8 s after it is armed, often is not). One
 * compacting GC once start-up is done gives those pages back: ~0.8 MiB of an idle agent's RSS.
 *
 * Why once at start and not whenever the agent goes idle: a major GC clears V8's lookup caches
 * and the calls after it run cold; measured, a GC after each quiet spell made the next burst's
 * `list_directory` ~20 % slower (bench/results/2026-11-24-sandbox-2.md), while garbage from the
 * calls themselves is young and dies in scavenges. At start it costs a few ms once.
 *
 * The GC compacts because the agent runs with `--compact-on-every-full-gc` (AGENT_NODE_FLAGS;
 * V8 reads it only at start-up), and `gc` is there because it runs with `--expose-gc`.
 */

/** V8's gc function, there when the agent runs with `--expose-gc` (AGENT_NODE_FLAGS). */
function exposedGc(): (() => void) | undefined {
  const gc = (globalThis as { gc?: unknown }).gc;
  return typeof gc === 'function' ? (gc as () => void) : undefined;
}

/**
 * Collects once the current turn of the event loop is over: after the frames already waiting
 * (the executor's first ping) are answered, before the loop waits for more. Without `gc` (an
 * agent started by hand, without the flags) it does nothing.
 */
export function collectAfterStart(): void {
  const gc = exposedGc();
  if (gc) setImmediate(gc);
}
