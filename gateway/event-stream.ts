/**
 * A response as a `text/event-stream` scoped to one request (Streamable HTTP): its notifications
 * (progress) as they happen, then its JSON-RPC response, then the end. The stream opens only when
 * there is something to stream, so a quick call still gets plain JSON; each event is written at
 * once, and `X-Accel-Buffering: no` asks proxies not to hold it back.
 */
import type { ServerResponse } from 'node:http';
import type { Context } from 'koa';
import { parseMediaType } from './request-body';

/** Whether the client's Accept lists `text/event-stream` (q=0 excluded). */
export function acceptsEventStream(accept: string | undefined): boolean {
  if (!accept) return false;
  return accept.split(',').some((part) => {
    const media = parseMediaType(part.trim());
    return media?.essence === 'text/event-stream' && media.parameters.get('q') !== '0';
  });
}

export class EventStream {
  private readonly res: ServerResponse;

  /** Takes the response over from Koa and sends the headers now. */
  constructor(ctx: Context) {
    ctx.status = 200; // for the metrics and logs that read it; Koa writes nothing itself from here
    ctx.respond = false;
    this.res = ctx.res;
    this.res.writeHead(200, {
      'Content-Type': 'text/event-stream',
      'Cache-Control': 'no-cache, no-transform',
      'X-Accel-Buffering': 'no',
    });
    this.res.flushHeaders();
  }

  /** One JSON-RPC message as one `message` event. */
  send(text: string): void {
    if (this.res.writableEnded || this.res.destroyed) return;
    this.res.write(`event: message\ndata: ${text}\n\n`);
  }

  end(): void {
    if (!this.res.writableEnded) this.res.end();
  }
}
