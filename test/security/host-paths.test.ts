/**
 * Absolute host paths and file ownership on every backend (DESIGN §5: a relative path, or an
 * absolute host path inside the root, on every backend; files a sandbox writes keep the root
 * owner's uid).
 *
 * A local agent sends the paths it sees (`/home/ann/project/src/a.ts`). Inside the root they must
 * work on none, bwrap and docker alike — for every path argument (path, paths, source,
 * destination, cwd) — and anything outside must still be refused: `/etc/passwd`, `ROOT/..`,
 * `ROOT_evil` beside it, a climb through a subdirectory. Each outside attempt is a probe of
 * `host-paths[backend]`: refused when the call says "outside the workspace" and nothing outside
 * was read or changed. On bwrap and docker the root belongs to an ordinary uid (not the one the
 * backend would pick on its own) and every file the sandbox writes — by a file tool or a command —
 * must keep that owner. The last test runs the real `toolgate stdio --sandbox bwrap` through the
 * official SDK client, as a local user would.
 */
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { Sandbox, SandboxBackend } from '../../executor/sandbox/backend';
import { bwrapBackend } from '../../executor/sandbox/bwrap';
import { noneBackend } from '../../executor/sandbox/none';
import { sandboxOwner } from '../../executor/sandbox/owner';
import { DEFAULT_LIMITS } from '../../shared/limits';
import type { ToolResult } from '../../shared/tools/tool';
import { describeIf, hasCommand, isRoot } from '../helpers/availability';
import { dockerUnavailable, ensureSandboxImage, SANDBOX_IMAGE } from '../helpers/docker';
import { callParsing } from '../../executor/sandbox/sandbox-tools';
import { BIN } from '../stdio/server';
import { tally } from './tally';

const never = () => new AbortController().signal;
/** An ordinary owner for the root: neither root nor the backends' default (65534). */
const OWNER = { uid: 4243, gid: 4244 };
const textOf = (r: ToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');

interface Case {
  name: 'none' | 'bwrap' | 'docker';
  available: boolean;
  reason: string;
  backend(): SandboxBackend;
  /** Whether the sandbox runs as the root's owner (none runs as this process's user). */
  owned: boolean;
  setup?: () => Promise<void>;
}

const cases: Case[] = [
  { name: 'none', available: true, reason: '', backend: () => noneBackend(), owned: false },
  {
    name: 'bwrap',
    available: hasCommand('bwrap') && isRoot,
    reason: 'needs bubblewrap and root (to give the root to another uid)',
    backend: () => bwrapBackend(),
    owned: true,
  },
  {
    name: 'docker',
    available: dockerUnavailable === undefined && isRoot,
    reason: dockerUnavailable ?? 'needs root (to give the root to another uid)',
    backend: () => {
      const { dockerBackend } = require('../../executor/sandbox/docker/backend') as typeof import('../../executor/sandbox/docker/backend');
      return dockerBackend({ image: SANDBOX_IMAGE, executorId: `host-paths-${process.pid}` });
    },
    owned: true,
    setup: () => ensureSandboxImage(),
  },
];

for (const c of cases) {
  const set = `host-paths[${c.name}]`;
  describeIf(c.available, c.reason, `absolute host paths and owners (${c.name})`, () => {
    let base: string;
    let root: string;
    let sibling: string;
    let outsideFile: string;
    let sandbox: Sandbox;
    const secret = `OUTSIDE-SECRET-${randomBytes(8).toString('hex')}`;
    // Parsed first, as the executor's job handler does (the Sandbox contract).
    const call = (tool: string, args: Record<string, unknown>) => callParsing(sandbox, tool, args, never());
    const outsideState = async () => JSON.stringify([await fs.readdir(base), await fs.readFile(outsideFile, 'utf8'), await fs.readdir(sibling)]);

    beforeAll(async () => {
      await c.setup?.();
      base = await fs.mkdtemp(path.join(os.tmpdir(), `tg-hostpaths-${c.name}-`));
      await fs.chmod(base, 0o711);
      root = path.join(base, 'project');
      sibling = `${root}_evil`;
      outsideFile = path.join(base, 'outside.txt');
      await fs.mkdir(root, { mode: 0o755 });
      await fs.mkdir(sibling);
      await fs.writeFile(path.join(sibling, 'x'), secret);
      await fs.writeFile(outsideFile, secret);
      if (c.owned) await fs.chown(root, OWNER.uid, OWNER.gid);
      // What `toolgate stdio` does: the sandbox runs as the root's owner.
      sandbox = await c.backend().start({ workspace: root, limits: DEFAULT_LIMITS, tenant: `host-paths-${c.name}`, ...(await sandboxOwner(root)) });
    }, 240_000);
    afterAll(async () => {
      await sandbox?.stop();
      if (base) await fs.rm(base, { recursive: true, force: true });
    });

    it('accepts absolute host paths inside the root in every path argument', async () => {
      const at = (...p: string[]) => path.join(root, ...p);
      expect((await call('write_file', { path: at('abs.txt'), content: 'abs' })).isError).toBeFalsy();
      expect((await call('read_file', { path: at('abs.txt') })).structuredContent?.content).toBe('abs');
      expect((await call('create_directory', { path: at('d', 'e') })).isError).toBeFalsy();
      const listed = await call('list_directory', { path: root });
      expect((listed.structuredContent?.entries as Array<{ name: string }>).map((e) => e.name).sort()).toEqual(['abs.txt', 'd']);
      expect((await call('move_path', { source: at('abs.txt'), destination: at('d', 'moved.txt') })).isError).toBeFalsy();
      const many = await call('read_multiple_files', { paths: [at('d', 'moved.txt'), at('d', '..', 'd', 'moved.txt')] });
      expect(many.isError).toBeFalsy();
      expect(JSON.stringify(many.structuredContent)).toContain('abs');
      expect((await call('get_file_info', { path: at('d') })).structuredContent).toMatchObject({ type: 'directory' });
      const ran = await call('run_command', { command: 'ls', cwd: at('d') });
      expect((ran.structuredContent as { stdout: string }).stdout).toBe('e\nmoved.txt\n');
      expect((await call('delete_path', { path: at('d', 'moved.txt') })).isError).toBeFalsy();
      await expect(fs.stat(at('d', 'moved.txt'))).rejects.toMatchObject({ code: 'ENOENT' });
    }, 60_000);

    it('refuses absolute paths outside the root, however they are spelled', async () => {
      const outside = [
        '/etc/passwd',
        outsideFile,
        path.join(root, '..', 'outside.txt'),
        path.join(root, 'd', '..', '..', 'outside.txt'),
        path.join(sibling, 'x'),
        `${root}/../${path.basename(sibling)}/x`,
      ];
      for (const p of outside) {
        const before = await outsideState();
        const attempts: Array<[string, ToolResult]> = [
          ['read_file', await call('read_file', { path: p })],
          ['write_file', await call('write_file', { path: p, content: 'pwned' })],
          ['list_directory', await call('list_directory', { path: path.dirname(p) })],
          ['read_multiple_files', await call('read_multiple_files', { paths: [p] })],
          ['move_path', await call('move_path', { source: p, destination: 'stolen.txt' })],
          ['run_command', await call('run_command', { command: 'cat x outside.txt 2>/dev/null; pwd', cwd: path.dirname(p) })],
        ];
        const after = await outsideState();
        for (const [tool, r] of attempts) {
          const body = JSON.stringify(r);
          const leaked = body.includes(secret) || after !== before;
          // read_multiple_files reports per path inside a successful result.
          const refused =
            tool === 'read_multiple_files' ? /outside the workspace/.test(body) : r.isError === true && /outside the workspace|leads outside/.test(textOf(r));
          tally.probe(set, refused && !leaked, leaked);
          if (!refused || leaked) throw new Error(`${tool} ${p}: ${body.slice(0, 300)}`);
        }
      }
    }, 120_000);

    // On none the agent is this process's user: there is no other owner to keep, so no such test.
    if (c.owned)
      it("keeps the root owner's uid on every file the sandbox writes", async () => {
        await call('write_file', { path: 'by-tool.txt', content: 'x' });
        await call('create_directory', { path: 'made/by/tool' });
        await call('edit_file', { path: 'by-tool.txt', edits: [{ oldText: 'x', newText: 'y' }] });
        const ran = await call('run_command', { command: 'echo c > by-command.txt && mkdir -p made/by/command && touch made/by/command/f' });
        expect((ran.structuredContent as { exitCode: number }).exitCode).toBe(0);
        for (const rel of ['by-tool.txt', 'made', 'made/by/tool', 'by-command.txt', 'made/by/command', 'made/by/command/f']) {
          const st = await fs.stat(path.join(root, rel));
          expect({ rel, uid: st.uid, gid: st.gid }).toEqual({ rel, uid: OWNER.uid, gid: OWNER.gid });
        }
      }, 60_000);
  });
}

describeIf(
  hasCommand('bwrap') && isRoot,
  'needs bubblewrap and root (to give the root to another uid)',
  'toolgate stdio --sandbox bwrap for a local user (SDK client)',
  () => {
    let root: string;
    let client: Client;

    beforeAll(async () => {
      root = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-hostpaths-stdio-'));
      await fs.chmod(root, 0o755);
      await fs.chown(root, OWNER.uid, OWNER.gid); // a user's checkout: no chown to a sandbox uid first
      client = new Client({ name: 'host-paths', version: '1.0.0' });
      await client.connect(
        new StdioClientTransport({
          command: process.execPath,
          args: [BIN, 'stdio', '--root', root, '--sandbox', 'bwrap'],
          env: { ...getDefaultEnvironment(), TOOLGATE_LOG_LEVEL: 'warn', TOOLGATE_DATA_DIR: path.join(root, '.toolgate-unused') },
          stderr: 'ignore',
        }),
      );
    }, 60_000);
    afterAll(async () => {
      await client?.close();
      if (root) await fs.rm(root, { recursive: true, force: true });
    });

    it('takes the absolute paths a local agent sends and writes files its user owns', async () => {
      const file = path.join(root, 'src', 'a.ts');
      const wrote = (await client.callTool({ name: 'write_file', arguments: { path: file, content: 'export {}\n' } })) as ToolResult;
      expect(wrote.isError).toBeFalsy();
      const read = (await client.callTool({ name: 'read_file', arguments: { path: file } })) as ToolResult;
      expect(read.structuredContent?.content).toBe('export {}\n');
      const st = await fs.stat(file);
      expect({ uid: st.uid, gid: st.gid }).toEqual(OWNER);
      const outside = (await client.callTool({ name: 'read_file', arguments: { path: path.join(root, '..') } })) as ToolResult;
      expect(outside.isError).toBe(true);
      expect(textOf(outside)).toMatch(/outside the workspace/);
    }, 60_000);
  },
);

describeIf(
  hasCommand('bwrap') && hasCommand('setpriv') && isRoot,
  'needs bubblewrap, and root to become an ordinary user with setpriv',
  'toolgate stdio --sandbox bwrap run by an ordinary user (no root)',
  () => {
    let root: string;
    let client: Client;

    beforeAll(async () => {
      root = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-hostpaths-user-'));
      await fs.chmod(root, 0o755);
      await fs.chown(root, OWNER.uid, OWNER.gid);
      client = new Client({ name: 'host-paths-user', version: '1.0.0' });
      await client.connect(
        new StdioClientTransport({
          command: 'setpriv',
          args: [
            '--reuid',
            String(OWNER.uid),
            '--regid',
            String(OWNER.gid),
            '--clear-groups',
            process.execPath,
            BIN,
            'stdio',
            '--root',
            root,
            '--sandbox',
            'bwrap',
          ],
          env: { ...getDefaultEnvironment(), HOME: root, TOOLGATE_LOG_LEVEL: 'warn', TOOLGATE_DATA_DIR: path.join(root, '.toolgate-unused') },
          stderr: 'ignore',
        }),
      );
    }, 60_000);
    afterAll(async () => {
      await client?.close();
      if (root) await fs.rm(root, { recursive: true, force: true });
    });

    it('runs the sandbox as that user (a user namespace): absolute paths work, files are theirs', async () => {
      const file = path.join(root, 'mine.txt');
      expect(((await client.callTool({ name: 'write_file', arguments: { path: file, content: 'x' } })) as ToolResult).isError).toBeFalsy();
      const ran = (await client.callTool({ name: 'run_command', arguments: { command: 'id -u; touch by-command', cwd: root } })) as ToolResult;
      expect((ran.structuredContent as { stdout: string }).stdout).toBe(`${OWNER.uid}\n`);
      for (const f of ['mine.txt', 'by-command']) {
        const st = await fs.stat(path.join(root, f));
        expect({ f, uid: st.uid, gid: st.gid }).toEqual({ f, ...OWNER });
      }
    }, 60_000);
  },
);
