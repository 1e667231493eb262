/**
 * How the workspace disk quota reads in messages. The executor enforces it (a filesystem image
 * per workspace, executor/workspace-quota.ts) and tells the sandbox agent its size through the
 * limits it starts the agent with (`workspaceQuotaBytes`, `workspaceQuotaInodes`), so a write
 * the kernel refuses with ENOSPC/EDQUOT is answered naming the quota, not the host's disk. The
 * agent serves exactly one workspace, so the size is one process-wide setting, made once at
 * its start; without it (the `none` backend, `stdio`) the message names the device.
 */

/** Limits the agent receives beside its ToolLimits when its workspace has a quota. */
export interface WorkspaceQuotaLimits {
  workspaceQuotaBytes?: number;
  workspaceQuotaInodes?: number;
}

const UNITS = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB'] as const;

/** "1 GiB", "1.5 GiB", "100 MiB", "512 bytes". */
export function formatBytes(bytes: number): string {
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${Number.isInteger(value) ? value : value.toFixed(1)} ${UNITS[unit]}`;
}

/** "1 GiB, 65536 files" (inodes 0: mkfs's default, not named). */
export function describeQuota(bytes: number, inodes: number): string {
  return inodes > 0 ? `${formatBytes(bytes)}, ${inodes} files` : formatBytes(bytes);
}

let quotaDescription: string | undefined;

/** Called once by the sandbox agent at start-up with the limits it was given. */
export function setWorkspaceQuota(limits: WorkspaceQuotaLimits): void {
  const bytes = limits.workspaceQuotaBytes;
  quotaDescription = typeof bytes === 'number' && bytes > 0 ? describeQuota(bytes, limits.workspaceQuotaInodes ?? 0) : undefined;
}

/** The sentence for ENOSPC/EDQUOT while writing `shown`. */
export function noSpaceMessage(shown: string): string {
  return quotaDescription
    ? `Workspace quota exceeded (${quotaDescription}) while writing ${shown}: delete files to make room`
    : `No space left on device while writing ${shown}`;
}
