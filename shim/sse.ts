/**
 * Reads a `text/event-stream` body (https://html.spec.whatwg.org/multipage/server-sent-events.html)
 * as its events' data, one string per event, as they arrive: the gateway streams a request's
 * progress this way, then its response. Comments (`:`), ids and retry fields are ignored.
 */
export class SseParser {
  private buffer = '';
  private data: string[] = [];

  constructor(private readonly onEvent: (data: string) => void) {}

  push(chunk: string): void {
    this.buffer += chunk;
    let newline: number;
    while ((newline = this.buffer.search(/\r\n|\r|\n/)) !== -1) {
      const line = this.buffer.slice(0, newline);
      const skip = this.buffer.startsWith('\r\n', newline) ? 2 : 1;
      this.buffer = this.buffer.slice(newline + skip);
      this.line(line);
    }
  }

  /** The stream ended: an event without its blank line is still delivered. */
  end(): void {
    if (this.buffer !== '') this.line(this.buffer);
    this.buffer = '';
    this.line('');
  }

  private line(line: string): void {
    if (line === '') {
      if (this.data.length > 0) this.onEvent(this.data.join('\n'));
      this.data = [];
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'data') this.data.push(value);
  }
}
