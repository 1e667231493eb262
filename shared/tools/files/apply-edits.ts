/**
 * edit_file's matching rules: each oldText must occur exactly once (or, with replaceAll, at
 * least once), matched exactly, one edit after another on the evolving text. The one leniency:
 * in a CRLF file an oldText written with LF line ends is matched (and its newText written) with
 * CRLF. Replacement is by slicing, so `$&`-style patterns in newText stay literal.
 */
import { ToolError } from '../../protocol/errors';

export interface Edit {
  oldText: string;
  newText: string;
  replaceAll?: boolean;
}

function positions(text: string, needle: string): number[] {
  const at: number[] = [];
  for (let i = text.indexOf(needle); i !== -1; i = text.indexOf(needle, i + needle.length)) at.push(i);
  return at;
}

const lineOf = (text: string, index: number): number => text.slice(0, index).split('\n').length;
const squash = (s: string): string => s.replace(/\s+/g, ' ').trim();

export function applyEdits(original: string, edits: readonly Edit[], shown: string): { text: string; replacements: number } {
  let text = original;
  let replacements = 0;
  edits.forEach((edit, i) => {
    const which = edits.length > 1 ? `edit ${i + 1} of ${edits.length}` : 'the edit';
    if (edit.oldText === '') throw new ToolError(`In ${which}, oldText is empty; give the exact text to replace`);
    let { oldText, newText } = edit;
    let at = positions(text, oldText);
    if (at.length === 0 && text.includes('\r\n') && oldText.includes('\n') && !oldText.includes('\r\n')) {
      oldText = oldText.replace(/\n/g, '\r\n');
      newText = newText.replace(/\r?\n/g, '\r\n');
      at = positions(text, oldText);
    }
    if (at.length === 0) {
      const hint =
        text.length <= 4 * 1024 * 1024 && squash(text).includes(squash(oldText))
          ? ' (text differing only in whitespace exists; copy the exact characters, indentation included)'
          : '';
      throw new ToolError(`In ${which}, oldText was not found in ${shown}${hint}. Nothing was changed.`);
    }
    if (at.length > 1 && !edit.replaceAll) {
      const lines = at
        .slice(0, 10)
        .map((p) => lineOf(text, p))
        .join(', ');
      throw new ToolError(
        `In ${which}, oldText occurs ${at.length} times in ${shown} (lines ${lines}${at.length > 10 ? ', …' : ''}); ` +
          'add surrounding lines so it matches once, or set replaceAll. Nothing was changed.',
      );
    }
    text = edit.replaceAll ? text.split(oldText).join(newText) : text.slice(0, at[0]!) + newText + text.slice(at[0]! + oldText.length);
    replacements += at.length;
  });
  return { text, replacements };
}
