/**
 * What an executor's start-up removes from the Docker host: containers this process made, or
 * whose owner provably no longer runs, or (owner unknown: a run from before the owner label)
 * labelled with its own executor id; never a live process's, whatever id it runs under.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { EXECUTOR_LABEL, OWNER_LABEL, SANDBOX_LABEL } from '../../executor/sandbox/docker/container';
import { cleanupStaleSandboxes } from '../../executor/sandbox/docker/stale';
import { currentOwner } from '../../executor/process-owner';
import { describeIf } from '../helpers/availability';
import { dockerUnavailable, ensureSandboxImage, SANDBOX_IMAGE } from '../helpers/docker';

describeIf(!dockerUnavailable, dockerUnavailable ?? '', 'docker: stale sandbox clean-up', () => {
  const id = `tg-stale-${process.pid}`;
  const created: string[] = [];
  const make = (labels: Record<string, string>): string => {
    const args = ['create', '--network', 'none', '--label', `${SANDBOX_LABEL}=1`];
    for (const [k, v] of Object.entries(labels)) args.push('--label', `${k}=${v}`);
    const cid = execFileSync('docker', [...args, SANDBOX_IMAGE], { encoding: 'utf8' }).trim();
    created.push(cid);
    return cid;
  };
  const exists = (cid: string) => execFileSync('docker', ['ps', '-aq', '--no-trunc', '--filter', `id=${cid}`], { encoding: 'utf8' }).trim() !== '';

  beforeAll(() => ensureSandboxImage(), 180_000);
  afterAll(() => {
    for (const cid of created) execFileSync('docker', ['rm', '-f', cid], { stdio: 'ignore' });
  });

  it("removes its own, a dead owner's and its id's unlabelled ones, never a live process's", async () => {
    const self = currentOwner(id);
    const initStart = readFileSync('/proc/1/stat', 'utf8').split(') ')[1]!.split(' ')[19]!;
    const own = make({ [EXECUTOR_LABEL]: id, [OWNER_LABEL]: JSON.stringify(self) });
    const dead = make({ [EXECUTOR_LABEL]: `${id}-other`, [OWNER_LABEL]: JSON.stringify({ ...self, id: `${id}-other`, start: '1' }) });
    const legacy = make({ [EXECUTOR_LABEL]: id });
    const live = make({ [EXECUTOR_LABEL]: id, [OWNER_LABEL]: JSON.stringify({ ...self, pid: 1, start: initStart }) });
    const otherLegacy = make({ [EXECUTOR_LABEL]: `${id}-other` });
    expect(await cleanupStaleSandboxes(id)).toBeGreaterThanOrEqual(3);
    expect([own, dead, legacy, live, otherLegacy].map(exists)).toEqual([false, false, false, true, true]);
  }, 60_000);
});
