/**
 * The escape suite's fixture, built on the host: secrets outside and in the `<root>_evil`
 * sibling, and in the root every kind of link out (absolute, relative, to a file, dangling,
 * chained, a link back up) plus the pieces the racer swaps. Also the outside snapshot and the
 * racer program.
 */
import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';

export async function clearDir(dir: string): Promise<void> {
  // rm on a symlink removes the link, never what it points to.
  for (const name of await fs.readdir(dir).catch(() => [] as string[])) await fs.rm(path.join(dir, name), { recursive: true, force: true });
}

export interface FixtureSpec {
  root: string;
  outside: string;
  sibling: string;
  secret: string;
  onlyOutside: string;
}

export async function buildFixture(f: FixtureSpec): Promise<void> {
  await Promise.all([clearDir(f.root), clearDir(f.outside), clearDir(f.sibling)]);
  await fs.writeFile(path.join(f.outside, 'secret.txt'), f.secret);
  await fs.writeFile(path.join(f.outside, f.onlyOutside), f.secret);
  await fs.mkdir(path.join(f.outside, 'dir'));
  await fs.writeFile(path.join(f.outside, 'dir', 'inner.txt'), f.secret);
  await fs.writeFile(path.join(f.sibling, 'secret.txt'), f.secret);

  const r = (rel: string) => path.join(f.root, rel);
  await fs.writeFile(r('ok.txt'), 'ok');
  await fs.mkdir(r('inside'));
  await fs.writeFile(r('inside/file.txt'), 'inside');
  await fs.symlink(f.outside, r('link-out'));
  await fs.symlink(path.relative(f.root, f.outside), r('link-rel-out'));
  await fs.symlink(path.join(f.outside, 'secret.txt'), r('file-link'));
  await fs.symlink(path.join(f.outside, 'missing.txt'), r('dangling'));
  await fs.symlink(path.join(f.outside, 'missing-dir'), r('dangling-dir'));
  await fs.symlink('link-out', r('chain'));
  await fs.symlink(path.relative(r('inside'), path.dirname(f.outside)), r('inside/up'));
  // What the racer swaps: `swap` between swap-real (a directory) and swap-link (a link out);
  // `fswap` between fswap-real (a file) and fswap-link (a link to the secret).
  await fs.mkdir(r('swap-real'));
  await fs.writeFile(r('swap-real/secret.txt'), 'inside-content');
  await fs.symlink(f.outside, r('swap-link'));
  await fs.writeFile(r('fswap-real'), 'inside-content');
  await fs.symlink(path.join(f.outside, 'secret.txt'), r('fswap-link'));
}

/** Everything below `dirs`, as comparable text: type, size, mtime, inode, link target, content hash. */
export async function outsideSnapshot(dirs: readonly string[]): Promise<string> {
  const lines: string[] = [];
  const visit = async (p: string): Promise<void> => {
    const st = await fs.lstat(p).catch(() => undefined);
    if (!st) return void lines.push(`${p} missing`);
    let extra = '';
    if (st.isSymbolicLink()) extra = `-> ${await fs.readlink(p)}`;
    else if (st.isFile())
      extra = createHash('sha256')
        .update(await fs.readFile(p))
        .digest('hex')
        .slice(0, 16);
    lines.push(`${p} ${st.isDirectory() ? 'dir' : st.isFile() ? 'file' : st.isSymbolicLink() ? 'link' : 'other'} ${st.size} ${st.mtimeMs} ${st.ino} ${extra}`);
    if (st.isDirectory()) for (const name of (await fs.readdir(p)).sort()) await visit(path.join(p, name));
  };
  for (const d of dirs) await visit(d);
  return lines.join('\n');
}

/**
 * Runs in its own process (argv: root outside) so the swaps really race the tool calls. Every
 * step is an atomic rename; when a tool has moved or deleted a piece, the piece is rebuilt.
 */
export const RACER = `
const fs = require('fs'), p = require('path');
const [root, outside] = process.argv.slice(1);
const r = (n) => p.join(root, n);
const exists = (n) => { try { fs.lstatSync(r(n)); return true; } catch { return false; } };
const mv = (a, b) => { try { fs.renameSync(r(a), r(b)); } catch {} };
// The race's own writes (write_file/edit_file through swap/) may overwrite the inside file; put its
// content back, or the test's check that the race was live could never see an inside read again.
// Only through names that are not symlinks: a rename out of step may have put the link there.
const isLink = (n) => { try { return fs.lstatSync(r(n)).isSymbolicLink(); } catch { return false; } };
const holdsInside = (n) => { try { return fs.readFileSync(r(n), 'utf8') === 'inside-content'; } catch { return false; } };
function repair() {
  if (!exists('swap-real')) { try { fs.mkdirSync(r('swap-real')); } catch {} }
  if (!isLink('swap-real') && !isLink('swap-real/secret.txt') && !holdsInside('swap-real/secret.txt')) { try { fs.writeFileSync(r('swap-real/secret.txt'), 'inside-content'); } catch {} }
  if (!exists('swap-link')) { try { fs.symlinkSync(outside, r('swap-link')); } catch {} }
  if (!isLink('fswap-real') && !holdsInside('fswap-real')) { try { fs.writeFileSync(r('fswap-real'), 'inside-content'); } catch {} }
  if (!exists('fswap-link')) { try { fs.symlinkSync(p.join(outside, 'secret.txt'), r('fswap-link')); } catch {} }
  for (const n of ['swap', 'fswap']) if (exists(n)) { try { fs.rmSync(r(n), { recursive: true, force: true }); } catch {} }
}
for (let i = 0; ; i++) {
  mv('swap-real', 'swap'); mv('fswap-real', 'fswap');
  mv('swap', 'swap-real'); mv('fswap', 'fswap-real');
  mv('swap-link', 'swap'); mv('fswap-link', 'fswap');
  mv('swap', 'swap-link'); mv('fswap', 'fswap-link');
  if (i % 50 === 0) repair();
}
`;
