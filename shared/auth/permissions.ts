/** The five permission values of the spec (§2) and the caller identity built from them. */
export const PERMISSIONS = ['file:read', 'file:write', 'file:list', 'system:exec', 'network:http'] as const;
export type Permission = (typeof PERMISSIONS)[number];

const known: ReadonlySet<string> = new Set(PERMISSIONS);
export const isPermission = (value: string): value is Permission => known.has(value);

/**
 * Who is calling, once authenticated: the tenant (the key that names its workspace, sandbox,
 * processes, tasks and limits; for the spec's HS256 token, its `id`) and what it may do. See
 * docs/architecture.md, "Names".
 */
export interface Caller {
  readonly tenant: string;
  readonly permissions: ReadonlySet<Permission>;
}

/**
 * Splits a comma-separated list (spec §2: each item trimmed), dropping empty items.
 * Returns the known permissions and, separately, the values that are not permissions.
 */
export function parsePermissionList(list: string): { permissions: Permission[]; unknown: string[] } {
  const permissions: Permission[] = [];
  const unknown: string[] = [];
  for (const item of list
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0)) {
    if (isPermission(item)) {
      if (!permissions.includes(item)) permissions.push(item);
    } else unknown.push(item);
  }
  return { permissions, unknown };
}
