/**
 * The MCP protocol revisions this server speaks, in two eras (MCP 2026-07-28, "Versioning"):
 * - legacy: a connection opens with `initialize`, which picks one of these for its session;
 * - modern: stateless, every request names its revision in `params._meta`.
 * A dual-era server serves both side by side; `server/discover` lists them all.
 */
export const LEGACY_PROTOCOL_VERSIONS = ['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25'] as const;
export const MODERN_PROTOCOL_VERSIONS = ['2026-07-28'] as const;

export const LATEST_LEGACY_VERSION = LEGACY_PROTOCOL_VERSIONS[LEGACY_PROTOCOL_VERSIONS.length - 1]!;

/** Every revision, newest first: what `server/discover` and UnsupportedProtocolVersion advertise. */
export const ALL_PROTOCOL_VERSIONS: readonly string[] = [...MODERN_PROTOCOL_VERSIONS, ...[...LEGACY_PROTOCOL_VERSIONS].reverse()];

export const isModernVersion = (v: string): boolean => (MODERN_PROTOCOL_VERSIONS as readonly string[]).includes(v);
export const isLegacyVersion = (v: string): boolean => (LEGACY_PROTOCOL_VERSIONS as readonly string[]).includes(v);

/**
 * Legacy version negotiation (`initialize`): echo the client's version when it is a legacy one we
 * speak, else offer the newest legacy one. A modern version is not offered here: a client that
 * speaks it does not send `initialize`.
 */
export function negotiateVersion(requested: unknown): string {
  return typeof requested === 'string' && isLegacyVersion(requested) ? requested : LATEST_LEGACY_VERSION;
}
