/**
 * The workspace-escape suite: for every file tool and every route out of the workspace (`..`,
 * an absolute outside path, the `/root_evil` prefix sibling, symlinks and dangling symlinks out,
 * chains, NUL bytes, over-long paths, a symlink swapped between check and open, writes through
 * a symlink or a hard link), the files outside are never read, written, created or removed.
 *
 * Backend-neutral: it needs only a way to call tools and the host paths of the workspace and of
 * a directory outside it. The fixture is built on the host; what the tools see may differ (in a
 * container the root is /workspace and host paths do not exist), and the assertions still hold.
 * Each check compares a snapshot of everything outside (content, size, mtime, inode, link
 * target) and searches every result for the secret's bytes and for a name only outside has.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import type { ToolResult } from '../../shared/tools/tool';
import { buildFixture, clearDir, outsideSnapshot, RACER } from '../workspace/escape-fixture';
import { invocations, rootInvocations, routes } from '../workspace/escape-routes';
import { tally } from './tally';

export interface EscapeTarget {
  call(name: string, args: Record<string, unknown>): Promise<ToolResult>;
  /** The workspace root on the host; the suite fills it with its fixture. */
  root: string;
  /** A host directory outside the root (not below it); the suite fills it with secrets. */
  outside: string;
  /** The root as the tools see it (e.g. `/workspace` in a container); default `root`. */
  rootAsSeen?: string;
  cleanup(): Promise<void>;
}

export interface EscapeSuiteOptions {
  /** Tool calls per race; the race runs at least this many, longer until both outcomes were seen. */
  raceIterations?: number;
  /** Names this run in the attack summary: `workspace-escape[<name>]`. */
  name?: string;
}

export function runWorkspaceEscapeSuite(makeCaller: () => Promise<EscapeTarget>, options: EscapeSuiteOptions = {}): void {
  const set = `workspace-escape[${options.name ?? 'unnamed'}]`;
  const secret = `TOOLGATE-SECRET-${randomBytes(12).toString('hex')}`;
  const onlyOutside = `outside-only-${randomBytes(6).toString('hex')}.txt`;
  let t: EscapeTarget;
  let sibling: string;
  let before: string;

  const leaks = (r: ToolResult): string | undefined => {
    const all = JSON.stringify(r);
    if (all.includes(secret) || all.includes(Buffer.from(secret).toString('base64'))) return 'the secret content';
    if (all.includes(onlyOutside)) return 'a name that exists only outside';
    return undefined;
  };
  const snapshot = () => outsideSnapshot([t.outside, sibling]);
  /** `refused`: whether the call's own refusal check passed (calls that may act inside pass it). */
  const expectSealed = async (r: ToolResult, what: string, refused = true) => {
    const leak = leaks(r);
    const after = await snapshot();
    const breached = leak !== undefined || after !== before;
    tally.probe(set, refused && !breached, breached);
    if (leak) throw new Error(`${what} leaked ${leak}: ${JSON.stringify(r).slice(0, 400)}`);
    expect(after).toBe(before);
  };

  beforeAll(async () => {
    t = await makeCaller();
    sibling = `${t.root}_evil`;
    await fs.mkdir(sibling, { recursive: true });
  });
  afterAll(async () => {
    await fs.rm(sibling, { recursive: true, force: true });
    await t?.cleanup();
  });
  beforeEach(async () => {
    await buildFixture({ root: t.root, outside: t.outside, sibling, secret, onlyOutside });
    before = await snapshot();
  });

  describe.each(routes)('route: %s', (_name, routeOf) => {
    it.each(invocations.map((inv) => [inv.label, inv] as const))('%s stays inside', async (label, inv) => {
      const route = routeOf({ root: t.root, rootAsSeen: t.rootAsSeen ?? t.root, outside: t.outside });
      const r = await t.call(inv.tool, inv.args(route));
      const mayAct = inv.onLinkItself && route.links.includes(inv.uses);
      await expectSealed(r, label, mayAct || inv.refused(r));
      if (!mayAct) expect({ label, refused: inv.refused(r), text: r.content }).toMatchObject({ refused: true });
    });
  });

  it.each(rootInvocations.map((inv) => [inv.label, inv] as const))('%s on the root neither follows nor leaks a link out', async (label, inv) => {
    const r = await t.call(inv.tool, inv.args);
    expect(r.isError).toBeFalsy();
    await expectSealed(r, label);
  });

  it('never changes an outside file through a hard link in the workspace', async () => {
    const target = path.join(t.outside, 'hard-target.txt');
    await fs.writeFile(target, 'hard-linked content');
    try {
      await fs.link(target, path.join(t.root, 'hard.txt'));
    } catch (err) {
      // Reasoned skip: a hard link needs one file system; where there is none, there is no route.
      console.warn(`hard-link route not testable here: ${(err as NodeJS.ErrnoException).code}`);
      return;
    }
    before = await snapshot();
    const calls: Array<[string, Record<string, unknown>]> = [
      ['write_file', { path: 'hard.txt', content: 'PWNED', mode: 'append' }],
      ['edit_file', { path: 'hard.txt', edits: [{ oldText: 'hard', newText: 'PWNED' }] }],
      ['write_file', { path: 'hard.txt', content: 'PWNED' }],
      ['write_file', { path: 'hard.txt', content: 'PWNED', mode: 'append' }],
      ['delete_path', { path: 'hard.txt' }],
    ];
    for (const [tool, args] of calls) await expectSealed(await t.call(tool, args), `${tool} ${JSON.stringify(args)}`);
    // Reading through a hard link is not refused: it is the same file, and only a command can
    // make one (in docker/bwrap it cannot reach outside files to link them; see the README).
  });

  it('a symlink swapped in between check and open never leads outside', async () => {
    const racer: ChildProcess = spawn(process.execPath, ['-e', RACER, t.root, t.outside, secret], { stdio: 'ignore' });
    const seen = { inside: 0, refused: 0 };
    const minimum = options.raceIterations ?? 3000;
    try {
      const swaps = raceCalls();
      for (let i = 0; i < minimum * 10 && (i < minimum || seen.inside === 0 || seen.refused === 0); i++) {
        const [tool, args] = swaps[i % swaps.length]!;
        const r = await t.call(tool, args);
        const leak = leaks(r);
        tally.probe(set, leak === undefined, leak !== undefined);
        if (leak) throw new Error(`${tool} ${JSON.stringify(args)} leaked ${leak} during the race: ${JSON.stringify(r).slice(0, 300)}`);
        if (tool === 'read_file' && args.path === 'swap/secret.txt') {
          if (!r.isError && JSON.stringify(r).includes('inside-content')) seen.inside++;
          else if (r.isError && /outside the workspace|symbolic link/.test(JSON.stringify(r.content))) seen.refused++;
        }
      }
    } finally {
      racer.kill('SIGKILL');
      await new Promise((resolve) => (racer.exitCode !== null || racer.signalCode !== null ? resolve(undefined) : racer.once('exit', resolve)));
    }
    // The race's calls were each counted above; the outside after the race is one more probe.
    const after = await snapshot();
    tally.probe(set, after === before, after !== before);
    expect(after).toBe(before);
    // The race was live: the same call both read the inside file and was refused.
    expect(seen.inside).toBeGreaterThan(0);
    expect(seen.refused).toBeGreaterThan(0);
  });

  afterAll(async () => {
    if (t) await clearDir(t.root);
  });
}

/** Calls made while the racer swaps `swap` (dir ⇄ symlink out) and `fswap` (file ⇄ symlink out). */
function raceCalls(): Array<[string, Record<string, unknown>]> {
  const re = { query: 'TOOLGATE-SECRET-[0-9a-f]+', regex: true };
  const others: Array<[string, Record<string, unknown>]> = [
    ['read_multiple_files', { paths: ['swap/secret.txt', 'fswap'] }],
    ['write_file', { path: 'swap/new.txt', content: 'PWNED', mode: 'create' }],
    ['write_file', { path: 'fswap', content: 'PWNED', mode: 'append' }],
    ['edit_file', { path: 'swap/secret.txt', edits: [{ oldText: 'TOOLGATE', newText: 'PWNED' }] }],
    ['edit_file', { path: 'fswap', edits: [{ oldText: 'TOOLGATE', newText: 'PWNED' }] }],
    ['list_directory', { path: 'swap' }],
    ['directory_tree', { path: 'swap' }],
    ['search_files', { path: 'swap', pattern: '*' }],
    ['search_text', { path: 'swap', ...re }],
    ['search_text', { path: '.', ...re }],
    ['get_file_info', { path: 'swap/secret.txt' }],
    ['create_directory', { path: 'swap/newdir/deeper' }],
    ['move_path', { source: 'swap/secret.txt', destination: 'moved.txt' }],
    ['move_path', { source: 'moved.txt', destination: 'swap/secret.txt' }],
    ['delete_path', { path: 'swap/newdir', recursive: true }],
    ['delete_path', { path: 'swap/new.txt' }],
    ['write_file', { path: 'fswap', content: 'inside-content' }],
    ['write_file', { path: 'swap/secret.txt', content: 'PWNED' }],
  ];
  // Reads have the narrowest window between check and open, so they come between every other call.
  return others.flatMap((call) => [['read_file', { path: 'swap/secret.txt' }], ['read_file', { path: 'fswap' }], call]);
}
