/**
 * Writes a file of the trusted side (the data directory's JSON stores, the egress CA, the
 * sandboxes' trust bundle) whole: a temporary file beside it, renamed into place, so a reader —
 * this process or another — sees the old content or the new, never a part.
 */
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';

export async function writeAtomically(file: string, content: string | Buffer, mode: number): Promise<void> {
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  await fs.writeFile(tmp, content, { mode });
  await fs.rename(tmp, file);
}
