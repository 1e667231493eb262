/**
 * How a tenant id (the token's `id`, any string the token issuer chose) becomes host names:
 * its workspace directory and, for uid-separating backends, its sandbox uid. Both derive from
 * SHA-256 over the id's UTF-16 code units: injective for every JavaScript string (UTF-8 would
 * map lone surrogates to U+FFFD, so "\uD800" and "\uFFFD" would share a workspace).
 */
import { createHash } from 'node:crypto';

/**
 * Sandbox uids: TENANT_UID_BASE + (hash mod TENANT_UID_SPAN). The range 1.5e9 – 1.6e9 lies
 * far above login users (1000–60000), nobody (65534) and the subordinate-id blocks useradd
 * hands out (100000 + 65536·n), and below 2^31, which some tools treat as negative. Two live
 * tenants sharing a uid is a 1-in-10^8 event per pair; it only merges their process counts
 * (RLIMIT_NPROC), never their files (each sandbox mounts only its own workspace) or processes
 * (each has its own pid namespace). The pool logs it if it happens.
 */
export const TENANT_UID_BASE = 1_500_000_000;
export const TENANT_UID_SPAN = 100_000_000;

/** Readable part of a workspace name: a hint for operators, never what makes names unique. */
const READABLE_CHARS = 32;
/** 128 bits of SHA-256: what keeps names apart. */
const HASH_HEX_CHARS = 32;

function digest(tenant: string): Buffer {
  return createHash('sha256').update(Buffer.from(tenant, 'utf16le')).digest();
}

/**
 * The tenant's workspace directory name: `<readable>-<hash>`. The readable part keeps only
 * `[A-Za-z0-9_-]` (never `.`, `/`, NUL or a leading `-`), so no id can name `..`, a path or an
 * option; the hash suffix keeps distinct ids apart however they are sanitized, cut or cased.
 * At most 65 characters, whatever the id's length.
 */
export function workspaceName(tenant: string): string {
  const readable =
    tenant
      .slice(0, READABLE_CHARS)
      .replace(/[^A-Za-z0-9_-]/g, '_')
      .replace(/^-/, '_') || '_';
  return `${readable}-${digest(tenant).toString('hex').slice(0, HASH_HEX_CHARS)}`;
}

/** The tenant's stable sandbox uid (and gid), in [TENANT_UID_BASE, TENANT_UID_BASE + TENANT_UID_SPAN). */
export function tenantUid(tenant: string): number {
  return TENANT_UID_BASE + (digest(tenant).readUInt32BE(0) % TENANT_UID_SPAN);
}
