/**
 * A request refused before its body was read (401, 413, 429, …) still has its client uploading.
 * If the gateway closed the connection now, the client's next write would meet a reset, which
 * can destroy the refusal before the client reads it ("fetch failed" instead of a 413). So the
 * rest of the body is read and discarded:
 *   - on a keep-alive connection the refusal goes out at once while the body drains behind it,
 *     and the connection stays usable;
 *   - on a connection the client asked to close (Node would close it as soon as the reply is
 *     sent), the refusal waits until the body has been drained.
 * Up to a bound: past `bound` bytes the connection is cut, so nobody makes the gateway read
 * forever (the server's requestTimeout bounds the time the same way).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

/** Enough for a client that sent many times the body limit before it read the refusal. */
export const REFUSED_BODY_DRAIN_BYTES = 256 * 1024 * 1024;

/** Starts discarding the unread body; resolves when the refusal may be sent. */
export function drainRefused(req: IncomingMessage, res: ServerResponse, bound = REFUSED_BODY_DRAIN_BYTES): Promise<void> {
  if (req.readableEnded || req.destroyed) return Promise.resolve();
  const drained = new Promise<void>((resolve) => {
    let bytes = 0;
    req.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes > bound) {
        req.socket.destroy();
        resolve();
      }
    });
    req.once('end', resolve);
    req.once('close', resolve);
  });
  req.resume();
  return res.shouldKeepAlive ? Promise.resolve() : drained;
}
