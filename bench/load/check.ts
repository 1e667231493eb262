/**
 * What the load left on disk, read back: every acknowledged write's directory holds its value,
 * and no other directory exists (under faults, a write whose outcome is unknown may or may not be
 * there); every acknowledged command's line is in its tenant's ledger, and no line is there twice
 * (a command that ran twice: "doubled").
 */
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import type { RunResult } from './run';
import type { LoadStack } from './stack';
import { LEDGER } from './workload';

export interface DiskCheck {
  expected: number;
  found: number;
  /** Ledger lines in all, and commands whose line is there more than once. */
  ledgerLines: number;
  doubled: number;
  problems: string[];
}

const MAX_PROBLEMS = 5;

export async function checkDisk(stack: LoadStack, result: Pick<RunResult, 'acknowledged' | 'uncertain' | 'echoed'>): Promise<DiskCheck> {
  const check: DiskCheck = { expected: 0, found: 0, ledgerLines: 0, doubled: 0, problems: [] };
  const problem = (text: string) => check.problems.length < MAX_PROBLEMS && check.problems.push(text);
  for (const [tenant, dirs] of result.acknowledged) {
    const workspace = stack.workspaceOf(tenant);
    const uncertain = result.uncertain.get(tenant) ?? new Set<string>();
    check.expected += dirs.size;
    const root = path.join(workspace, 'load');
    const onDisk = new Set<string>();
    for (const c of await fs.readdir(root).catch(() => [] as string[])) {
      for (const v of await fs.readdir(path.join(root, c))) onDisk.add(`load/${c}/${v}`);
    }
    for (const dir of dirs) {
      const content = await fs.readFile(path.join(workspace, dir, 'value.txt'), 'utf8').catch(() => undefined);
      if (content !== path.basename(dir)) problem(`${tenant}: ${dir}/value.txt holds ${JSON.stringify(content)}`);
    }
    for (const dir of onDisk) {
      if (dirs.has(dir)) check.found++;
      else if (!uncertain.has(dir)) problem(`${tenant}: ${dir} was written but never acknowledged`);
    }

    const lines = (await fs.readFile(path.join(workspace, LEDGER), 'utf8').catch(() => '')).split('\n').filter(Boolean);
    check.ledgerLines += lines.length;
    const counts = new Map<string, number>();
    for (const line of lines) counts.set(line, (counts.get(line) ?? 0) + 1);
    for (const [line, n] of counts) {
      if (n < 2) continue;
      check.doubled++;
      problem(`${tenant}: the command "${line}" ran ${n} times`);
    }
    for (const value of result.echoed.get(tenant) ?? []) if (!counts.has(value)) problem(`${tenant}: the acknowledged command "${value}" is not in ${LEDGER}`);
  }
  return check;
}
