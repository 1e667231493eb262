/**
 * write_file's "append" mode: the one write that changes a file in place, so the one that must
 * check what it opened. The name is opened in its pinned directory with O_NOFOLLOW (a symlink is
 * refused, never followed) and O_NONBLOCK (a FIFO cannot hang us), and a file with other hard
 * links is refused: one of them could be outside the workspace, and it would change too.
 */
import { closeSync, constants, fstatSync } from 'node:fs';
import { ToolError } from '../../protocol/errors';
import { writeFully } from '../../workspace/fd-io';
import { fsMessage, PinnedDir } from '../../workspace/workspace';
import { lstatOrNone } from './atomic-write';

const { O_WRONLY, O_APPEND, O_CREAT, O_NONBLOCK } = constants;

/** Returns whether the file was created. */
export async function appendTo(dir: PinnedDir, name: string, shown: string, bytes: Uint8Array): Promise<boolean> {
  const before = lstatOrNone(dir, name, shown);
  let fd: number;
  try {
    fd = dir.openFile(name, O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK, 0o666);
  } catch (err) {
    throw new ToolError(fsMessage(err, shown));
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) throw new ToolError(`Not a regular file: ${shown}`);
    if (stat.nlink > 1) {
      throw new ToolError(
        `Refused: ${shown} has ${stat.nlink} hard links (some may be outside the workspace) and appending in place would change them all; ` +
          'use mode "overwrite", which replaces this name only',
      );
    }
    await writeFully(fd, bytes);
  } catch (err) {
    if (err instanceof ToolError) throw err;
    throw new ToolError(fsMessage(err, shown));
  } finally {
    closeSync(fd);
  }
  return before === undefined;
}
