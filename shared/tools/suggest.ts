/**
 * "Did you mean …?" for names a caller got slightly wrong (a tool, an argument key): the
 * candidates nearest by edit distance (a swap of two neighbouring letters counts as one edit),
 * plus any that contain the name or that it contains. Small inputs only: names, not documents.
 */

/** Optimal string alignment distance: insertions, deletions, substitutions, adjacent swaps. */
export function editDistance(a: string, b: string): number {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const d: number[][] = Array.from({ length: rows }, (_, i) => Array.from({ length: cols }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i < rows; i++) {
    for (let j = 1; j < cols; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, d[i - 2]![j - 2]! + 1);
      d[i]![j] = best;
    }
  }
  return d[a.length]![b.length]!;
}

/**
 * Up to `max` candidates close to `name`, nearest first. Close means within a third of the
 * longer name's length in edits (at least 2), or one name containing the other.
 */
export function closestNames(name: string, candidates: Iterable<string>, max = 3): string[] {
  const wanted = name.toLowerCase();
  const scored: Array<{ candidate: string; score: number }> = [];
  for (const candidate of new Set(candidates)) {
    const other = candidate.toLowerCase();
    const distance = editDistance(wanted, other);
    const allowed = Math.max(2, Math.floor(Math.max(wanted.length, other.length) / 3));
    const contains = wanted.length >= 3 && (other.includes(wanted) || wanted.includes(other));
    if (distance <= allowed || contains) scored.push({ candidate, score: contains ? Math.min(distance, allowed) : distance });
  }
  scored.sort((x, y) => x.score - y.score || x.candidate.localeCompare(y.candidate));
  return scored.slice(0, max).map((s) => s.candidate);
}

/** ` Did you mean a or b?` (with a leading space), or '' when nothing is close. */
export function didYouMean(name: string, candidates: Iterable<string>, quote: (s: string) => string = (s) => s): string {
  const close = closestNames(name, candidates).map(quote);
  if (close.length === 0) return '';
  const list = close.length === 1 ? close[0]! : `${close.slice(0, -1).join(', ')} or ${close[close.length - 1]!}`;
  return ` Did you mean ${list}?`;
}

/** The -32602 message for a `tools/call` naming no tool we have, with the nearest names the caller may use. */
export function unknownToolMessage(name: string, available: Iterable<string>): string {
  return `Unknown tool: ${name}.${didYouMean(name, available)} tools/list shows the tools this caller may use.`;
}
