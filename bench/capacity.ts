/**
 * `npm run capacity -- [--sandbox docker|bwrap] [--tenants N]`: how many live tenants one
 * executor host holds, by memory (docs/deployment.md, "Capacity"). Starts N sandboxes of one
 * backend, one per tenant, each serving a read_file and a run_command, then measures what the
 * sandboxes add to the host:
 *
 * - PSS of every process a sandbox adds (the agent; for docker also the container's init and its
 *   containerd shim; for bwrap its wrappers), summed: shared pages (the node binary, the image's
 *   libraries) are charged once across all sandboxes, as the host pays them.
 * - MemAvailable before and after, from /proc/meminfo: the kernel's own view, page cache and
 *   kernel objects (cgroups, mount and pid namespaces) included, but also whatever else the host
 *   did meanwhile (so it is reported beside, not instead).
 *
 * Memory figures do not depend on CPU contention, so this may run beside other work. Prints a
 * Markdown table; with --out writes it to that file as well.
 */
import { promises as fs, readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import type { Sandbox, SandboxBackend } from '../executor/sandbox/backend';
import type * as TenantNames from '../executor/tenant-names';
import { chownTree, FILE_1K, makeFixture } from './lib/fixtures';
import { productModule } from './lib/product';
import { childrenMap, memoryBreakdownMiB, parentPid, processTree } from './lib/rss';
import { BackendName, createBackend, defaultLimits, dockerSandboxPids, echoHi, readFile, sandboxAgentPids } from './lib/sandbox';

const USAGE = 'Usage: npm run capacity -- [--sandbox docker|bwrap] [--tenants N] [--out FILE]';

function memAvailableMiB(): number {
  return Number(/^MemAvailable:\s+(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'))?.[1] ?? 0) / 1024;
}

/** Host pids of what the sandboxes add: docker's init, its shim and the agent; bwrap's whole tree under us. */
async function sandboxProcesses(name: BackendName): Promise<number[]> {
  if (name === 'bwrap') return processTree(process.pid, childrenMap()).filter((p) => p !== process.pid);
  const inits = await dockerSandboxPids();
  const children = childrenMap();
  const shims = inits.map(parentPid).filter((p): p is number => p !== undefined);
  return [...new Set([...shims, ...inits.flatMap((init) => processTree(init, children))])];
}

async function main(): Promise<void> {
  const { values: args } = parseArgs({
    options: { sandbox: { type: 'string', default: 'docker' }, tenants: { type: 'string', default: '40' }, out: { type: 'string' } },
  });
  const name = args.sandbox as BackendName;
  if (name !== 'docker' && name !== 'bwrap') throw new Error(USAGE);
  const tenants = Number(args.tenants);
  if (!Number.isInteger(tenants) || tenants < 1) throw new Error(USAGE);

  const backend: SandboxBackend = createBackend(name);
  const fixtures = await Promise.all(Array.from({ length: tenants }, () => makeFixture('toolgate-capacity-')));
  // Each tenant its own uid, owning its workspace, as the executor arranges (tenant-names.ts): one
  // shared uid would put every sandbox under one RLIMIT_NPROC.
  const { TENANT_UID_BASE } = productModule<typeof TenantNames>('executor/tenant-names');
  const uidOf = (i: number) => TENANT_UID_BASE + i;
  for (const [i, fixture] of fixtures.entries()) await chownTree(fixture.root, uidOf(i));
  const sandboxes: Sandbox[] = [];
  await new Promise((r) => setTimeout(r, 1000));
  const availableBefore = memAvailableMiB();
  const t0 = performance.now();
  try {
    for (const [i, fixture] of fixtures.entries()) {
      const sandbox = await backend.start({ workspace: fixture.root, limits: defaultLimits(), tenant: `capacity-${i + 1}`, uid: uidOf(i) });
      sandboxes.push(sandbox);
      await readFile(sandbox, FILE_1K);
      await echoHi(sandbox);
    }
    const startMs = (performance.now() - t0) / tenants;
    await new Promise((r) => setTimeout(r, 2000)); // idle, as most tenants are most of the time
    const pids = await sandboxProcesses(name);
    const parts = pids.map(memoryBreakdownMiB);
    const pss = parts.reduce((t, p) => t + p.pss, 0);
    const anon = parts.reduce((t, p) => t + p.anon, 0);
    const agents = (await sandboxAgentPids(name)).length;
    if (agents !== tenants) throw new Error(`expected ${tenants} live agents, found ${agents}`);
    const availableDrop = availableBefore - memAvailableMiB();
    const row = (label: string, value: string) => `| ${label} | ${value} |`;
    const table = [
      `## Capacity by memory: ${tenants} live ${name} sandboxes, idle after a read_file and a run_command each`,
      '',
      `Measured ${new Date().toISOString()} on this host (${process.version} runs the bench; the sandbox's own runtime as its backend has it).`,
      '',
      '| measure | value |',
      '|---|---|',
      row('processes the sandboxes add', String(pids.length)),
      row('PSS of those, all sandboxes', `${pss.toFixed(0)} MiB`),
      row('PSS per sandbox', `${(pss / tenants).toFixed(1)} MiB`),
      row('anonymous memory per sandbox (its own pages)', `${(anon / tenants).toFixed(1)} MiB`),
      row('MemAvailable drop per sandbox (kernel view, includes page cache and namespaces)', `${(availableDrop / tenants).toFixed(1)} MiB`),
      row('start + first calls per sandbox, one after another', `${startMs.toFixed(0)} ms`),
      row('live sandboxes per GiB of RAM (by PSS)', `${Math.floor(1024 / (pss / tenants))}`),
      '',
    ].join('\n');
    process.stdout.write(`${table}\n`);
    const out = args.out;
    if (out) await fs.appendFile(out, `${table}\n`);
  } finally {
    for (const sandbox of sandboxes) await sandbox.stop().catch(() => undefined);
    await Promise.all(fixtures.map((f) => f.remove()));
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
