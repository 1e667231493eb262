/**
 * One compacting full GC when the agent goes quiet. An idle agent holds what its last calls left
 * in the V8 heap: dead objects and half-empty old-space pages (~1 MiB of its RSS). V8's own memory
 * reducer gives them back only 8 s after it was armed, and not at all when no major GC has run
 * yet (the usual case for an agent: its heap stays below V8's first limit, so only scavenges run).
 * So the agent collects once itself after IDLE_GC_MS with no frame in or out, then not again until
 * the next frame: a busy agent never pays for it, a quiet one pays one GC (~5 ms) per quiet spell.
 *
 * The GC compacts because the agent runs with `--compact-on-every-full-gc` (AGENT_NODE_FLAGS;
 * V8 reads it only at start-up). Full GCs are otherwise rare in the agent (none in a run of
 * hundreds of calls), so the flag costs the calls nothing.
 */
import type { Transport } from '../../shared/transport/transport';

/** Quiet time before the one collection: well above the gaps between a busy caller's calls. */
export const IDLE_GC_MS = 500;

export class IdleGc {
  private readonly timer: NodeJS.Timeout;
  private armed = false;

  /** `gc`: V8's, exposed by `--expose-gc`; without it (an agent started by hand) this does nothing. */
  constructor(
    private readonly gc: (() => void) | undefined,
    delayMs = IDLE_GC_MS,
  ) {
    // One timer for the agent's life, re-armed with refresh(): nothing is allocated per frame.
    this.timer = setTimeout(this.collect, delayMs);
    this.timer.unref();
  }

  /** A frame came in or went out: the quiet spell starts again. */
  touch(): void {
    if (this.gc === undefined) return;
    this.armed = true;
    this.timer.refresh();
  }

  stop(): void {
    clearTimeout(this.timer);
  }

  private readonly collect = (): void => {
    if (!this.armed) return;
    this.armed = false;
    this.gc!();
  };

  /** `transport`, with every frame in either direction counted as activity. */
  watch(transport: Transport): Transport {
    const idle = this;
    return {
      start: () => transport.start(),
      close: () => transport.close(),
      send(frame) {
        idle.touch();
        return transport.send(frame);
      },
      set onmessage(handler: ((frame: string) => void) | undefined) {
        transport.onmessage = handler
          ? (frame) => {
              idle.touch();
              handler(frame);
            }
          : undefined;
      },
      get onmessage() {
        return transport.onmessage;
      },
      set onclose(handler: (() => void) | undefined) {
        transport.onclose = handler;
      },
      get onclose() {
        return transport.onclose;
      },
      set onerror(handler: ((error: Error) => void) | undefined) {
        transport.onerror = handler;
      },
      get onerror() {
        return transport.onerror;
      },
    };
  }
}

/** V8's gc function, there when the agent runs with `--expose-gc` (AGENT_NODE_FLAGS). */
export function exposedGc(): (() => void) | undefined {
  const gc = (globalThis as { gc?: unknown }).gc;
  return typeof gc === 'function' ? (gc as () => void) : undefined;
}
