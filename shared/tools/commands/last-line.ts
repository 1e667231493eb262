/**
 * The newest line of a command's output, for progress messages: the last non-blank line seen so
 * far (a partial one counts, so `npm install`'s spinner line shows), with control characters
 * removed and capped, so a message stays one short readable line.
 */
export const MAX_PROGRESS_LINE = 200;

export class LastLine {
  private partial = '';

  constructor(private readonly onLine: (line: string) => void) {}

  append(chunk: Buffer): void {
    // Only the tail matters: a huge chunk is not scanned whole.
    const text = this.partial + chunk.toString('utf8', Math.max(0, chunk.length - 4 * MAX_PROGRESS_LINE));
    const lines = text.split(/\r\n|\r|\n/);
    this.partial = (lines[lines.length - 1] ?? '').slice(-4 * MAX_PROGRESS_LINE);
    for (let i = lines.length - 1; i >= 0; i--) {
      const line = clean(lines[i]!);
      if (line !== '') return this.onLine(line);
    }
  }
}

// Matching control characters is the point of these two.
// eslint-disable-next-line no-control-regex
const ANSI_ESCAPE = /\x1b\[[0-9;?]*[ -/]*[@-~]/g;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\x00-\x08\x0b-\x1f\x7f]/g;

/** Drops ANSI escapes and control characters, trims, and caps to MAX_PROGRESS_LINE characters. */
export function clean(line: string): string {
  const text = line.replace(ANSI_ESCAPE, '').replace(CONTROL, '').trim();
  return text.length > MAX_PROGRESS_LINE ? `${text.slice(0, MAX_PROGRESS_LINE - 1)}…` : text;
}
