/**
 * `node dist-bench/bench/probes.js`: the small measurements behind the report's explanations,
 * each in its own fresh process, written to bench/results/<date>-probes.md:
 *   - lstat of 100 names through /proc/self/fd/N/name (how the workspace wall reaches names in a
 *     pinned directory) against a plain path;
 *   - child_process.spawn cost against the parent's resident memory (fork copies its page tables);
 *   - the sandbox agent's idle memory under a few V8 flags;
 *   - where the agent's start-up goes (Node itself, zod, the tool modules).
 */
import { execFileSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { DIR_100, FILE_1K, makeFixture } from './lib/fixtures';
import { DIST, REPO_ROOT } from './lib/product';
import { spawnRaw } from './lib/raw-client';
import { memoryBreakdownMiB } from './lib/rss';

const AGENT_MAIN = path.join(DIST, 'executor/agent/main.js');

/** Runs a snippet in a fresh node and returns its stdout. */
function node(code: string, args: string[] = []): string {
  return execFileSync(process.execPath, [...args, '-e', code], { encoding: 'utf8', cwd: REPO_ROOT, timeout: 120_000 });
}

function lstatProbe(dir: string): string[] {
  const code = `
const fs=require('fs');const dir=${JSON.stringify(path.join(dir, DIR_100))};const names=fs.readdirSync(dir);
const fd=fs.openSync(dir, fs.constants.O_RDONLY|fs.constants.O_DIRECTORY);
const t=(fn)=>{for(let i=0;i<200;i++)fn();const t0=process.hrtime.bigint();const N=2000;for(let i=0;i<N;i++)fn();return Number(process.hrtime.bigint()-t0)/1000/N;};
const r={plain:t(()=>{for(const n of names)fs.lstatSync(dir+'/'+n)}),proc:t(()=>{for(const n of names)fs.lstatSync('/proc/self/fd/'+fd+'/'+n)}),
readdirPlain:t(()=>fs.readdirSync(dir,{withFileTypes:true})),readdirProc:t(()=>fs.readdirSync('/proc/self/fd/'+fd,{withFileTypes:true}))};
console.log(JSON.stringify(r));`;
  const r = JSON.parse(node(code)) as Record<string, number>;
  return [
    '## lstat of 100 entries (µs per directory, 2,000 repetitions)',
    '',
    '| how | µs |',
    '|---|---:|',
    `| lstatSync(dir/name) × 100, plain path | ${r.plain!.toFixed(0)} |`,
    `| lstatSync(/proc/self/fd/N/name) × 100 (PinnedDir.lstat) | ${r.proc!.toFixed(0)} |`,
    `| readdirSync(dir, withFileTypes), plain path | ${r.readdirPlain!.toFixed(0)} |`,
    `| readdirSync(/proc/self/fd/N, withFileTypes) | ${r.readdirProc!.toFixed(0)} |`,
    '',
  ];
}

function spawnProbe(): string[] {
  const out = [
    "## child_process.spawn against the parent's resident memory (/bin/true, 300 spawns, p50)",
    '',
    '| parent RSS MiB | spawn() call µs | spawn to close µs |',
    '|---:|---:|---:|',
  ];
  for (const ballastMiB of [0, 100, 200]) {
    const code = `
const {spawn}=require('child_process');const keep=[];for(let i=0;i<${ballastMiB};i++)keep.push(Buffer.alloc(1024*1024,1));
const one=()=>new Promise(r=>{const t0=process.hrtime.bigint();const c=spawn('/bin/true',[],{stdio:'ignore'});const t1=process.hrtime.bigint();c.on('close',()=>r([Number(t1-t0)/1e3,Number(process.hrtime.bigint()-t0)/1e3]));});
(async()=>{for(let i=0;i<30;i++)await one();const a=[],b=[];for(let i=0;i<300;i++){const [s,t]=await one();a.push(s);b.push(t);}a.sort((x,y)=>x-y);b.sort((x,y)=>x-y);
const rss=+/VmRSS:\\s+(\\d+)/.exec(require('fs').readFileSync('/proc/self/status','utf8'))[1]/1024;console.log(JSON.stringify([rss,a[150],b[150]]));})();`;
    const [rss, call, close] = JSON.parse(node(code)) as [number, number, number];
    out.push(`| ${rss.toFixed(0)} | ${call.toFixed(0)} | ${close.toFixed(0)} |`);
  }
  out.push('');
  return out;
}

async function agentMemoryProbe(root: string): Promise<string[]> {
  const out = [
    '## The sandbox agent idle, by node flags (after 50 read_file + 50 list_directory + 5 run_command, 1 s idle)',
    '',
    '| node flags | RSS MiB | anonymous MiB | file-backed MiB | PSS MiB |',
    '|---|---:|---:|---:|---:|',
  ];
  for (const flags of [[], ['--max-semi-space-size=1'], ['--max-semi-space-size=1', '--max-old-space-size=64'], ['--lite-mode']]) {
    const agent = await spawnRaw(
      'agent',
      process.execPath,
      [...flags, AGENT_MAIN, '--root', root],
      { PATH: '/usr/bin:/bin' },
      { initialize: false, cwd: root },
    );
    try {
      for (let i = 0; i < 50; i++) {
        await agent.call('read_file', { path: FILE_1K });
        await agent.call('list_directory', { path: DIR_100 });
        if (i % 10 === 0) await agent.call('run_command', { argv: ['echo', 'hi'] });
      }
      await new Promise((r) => setTimeout(r, 1000));
      const m = memoryBreakdownMiB(agent.pid);
      out.push(`| ${flags.join(' ') || '(none)'} | ${m.rss.toFixed(1)} | ${m.anon.toFixed(1)} | ${m.file.toFixed(1)} | ${m.pss.toFixed(1)} |`);
    } finally {
      await agent.close();
    }
  }
  out.push('');
  return out;
}

function startupProbe(): string[] {
  const ms = (code: string) => Number(node(`const t=process.hrtime.bigint();${code};console.log(Number(process.hrtime.bigint()-t)/1e6)`).trim());
  const median = (f: () => number) => {
    const v = Array.from({ length: 5 }, f).sort((a, b) => a - b);
    return v[2]!;
  };
  const nodeStart = median(() => {
    const t0 = process.hrtime.bigint();
    node('0');
    return Number(process.hrtime.bigint() - t0) / 1e6;
  });
  const rows: Array<[string, number]> = [
    ['node -e 0, spawn to exit (from the probe)', nodeStart],
    ["require('zod')", median(() => ms("require('zod')"))],
    ['require(dist/shared/tools/files/index) (zod included)', median(() => ms(`require(${JSON.stringify(path.join(DIST, 'shared/tools/files/index.js'))})`))],
    [
      'require(dist/shared/tools/commands/index) (zod, node-pty included)',
      median(() => ms(`require(${JSON.stringify(path.join(DIST, 'shared/tools/commands/index.js'))})`)),
    ],
    ["require('node-pty')", median(() => ms("require('node-pty')"))],
  ];
  return [
    "## Where the agent's start-up goes (ms, median of 5 fresh processes)",
    '',
    '| step | ms |',
    '|---|---:|',
    ...rows.map(([k, v]) => `| ${k} | ${v.toFixed(1)} |`),
    '',
  ];
}

async function main(): Promise<void> {
  const fixture = await makeFixture();
  try {
    const out = [
      `# Probes — ${new Date().toISOString().slice(0, 16).replace('T', ' ')}`,
      '',
      `Load average ${os
        .loadavg()
        .map((v) => v.toFixed(2))
        .join(' / ')} on ${os.cpus().length} CPUs; every probe in a fresh process.`,
      '',
    ];
    out.push(...lstatProbe(fixture.root));
    out.push(...spawnProbe());
    out.push(...(await agentMemoryProbe(fixture.root)));
    out.push(...startupProbe());
    const file = path.join(REPO_ROOT, 'bench/results', `${new Date().toISOString().slice(0, 10)}-probes.md`);
    await fs.writeFile(file, out.join('\n'));
    process.stdout.write(`${out.join('\n')}\n`);
    process.stderr.write(`probes: wrote ${file}\n`);
  } finally {
    await fixture.remove();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`probes: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
