/**
 * Values whose JSON text is already known, so a reply that carries one splices the text instead
 * of serializing the value again. The gateway on the Redis bus receives each tool result as JSON
 * text from its executor and parses it to hand it on; serializing it once more inside the
 * JSON-RPC reply cost as much as the parse (≈ 16 µs for a 1 KiB `read_file`, on every call).
 *
 * The text stays the value's JSON because the value cannot change: it is frozen, all the way
 * down, when its text is remembered (code that tried to change it would throw, not send stale text).
 */
const known = new WeakMap<object, string>();

/**
 * Parses `text` (JSON.parse: it must be exactly one JSON value) and remembers it as the JSON of
 * the frozen result; throws as JSON.parse does.
 */
export function parseKnownJson(text: string): unknown {
  const value: unknown = JSON.parse(text);
  if (typeof value === 'object' && value !== null) known.set(deepFreeze(value), text);
  return value;
}

/** The remembered JSON text of `value`, if it came from `parseKnownJson`. */
export function knownJson(value: unknown): string | undefined {
  return typeof value === 'object' && value !== null ? known.get(value) : undefined;
}

function deepFreeze(value: object): object {
  Object.freeze(value);
  for (const member of Object.values(value)) if (typeof member === 'object' && member !== null && !Object.isFrozen(member)) deepFreeze(member as object);
  return value;
}
