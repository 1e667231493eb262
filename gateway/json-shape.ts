/**
 * Counts a JSON body's elements as its bytes arrive, so a body too complex to parse cheaply is
 * refused before it is parsed, and before it is even read to the end. `JSON.parse` of a 15 MiB
 * `[{},{},…]` (5 million objects) holds the event loop for seconds, and so do the walks after it
 * (depth check, validation); 16 of them from one caller stalled every other caller for minutes.
 * Byte size alone cannot tell that body from a 15 MiB string, which parses in milliseconds.
 *
 * An element is an array or object, or a member or element inside one: `{"a":[1,2]}` has 5
 * (the object, its member "a", the array, its two elements; the first member or element of a
 * container is counted when the container is seen to be non-empty, the others at their commas).
 * Strings are skipped (escapes honoured); nothing is validated — `JSON.parse` does that later,
 * on a body this scan has bounded. The work per chunk is linear in the chunk, so no single step
 * holds the event loop long, whatever the body.
 */
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_OBJECT = 0x7b;
const OPEN_ARRAY = 0x5b;
const CLOSE_OBJECT = 0x7d;
const CLOSE_ARRAY = 0x5d;
const COMMA = 0x2c;

function isWhitespace(b: number): boolean {
  return b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
}

export class JsonShape {
  private count = 0;
  private inString = false;
  private escaped = false;
  /** The last structural byte opened a container whose emptiness is not known yet. */
  private opened = false;

  constructor(readonly maxElements: number) {}

  /** Elements counted so far. */
  get elements(): number {
    return this.count;
  }

  /** Scans the next bytes; false as soon as the body has more than `maxElements` elements. */
  push(chunk: Uint8Array): boolean {
    let i = 0;
    const n = chunk.length;
    while (i < n) {
      if (this.inString) {
        // Jump to the next quote or backslash: string content is most of a large body.
        if (this.escaped) {
          this.escaped = false;
          i++;
          continue;
        }
        const quote = chunk.indexOf(QUOTE, i);
        const slash = chunk.indexOf(BACKSLASH, i);
        if (slash !== -1 && (quote === -1 || slash < quote)) {
          this.escaped = true;
          i = slash + 1;
        } else if (quote !== -1) {
          this.inString = false;
          i = quote + 1;
        } else {
          i = n;
        }
        continue;
      }
      const b = chunk[i++]!;
      if (isWhitespace(b)) continue;
      if (this.opened) {
        this.opened = false;
        if (b !== CLOSE_OBJECT && b !== CLOSE_ARRAY) this.count++; // its first member or element
      }
      if (b === QUOTE) this.inString = true;
      else if (b === OPEN_OBJECT || b === OPEN_ARRAY) {
        this.count++;
        this.opened = true;
      } else if (b === COMMA) this.count++;
      else continue;
      if (this.count > this.maxElements) return false;
    }
    return true;
  }
}
