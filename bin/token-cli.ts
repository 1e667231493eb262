/**
 * The token issuer behind both `generate-token` (spec §2) and `toolgate token`: issues an HS256
 * access token `{id, permissions, iat, exp}` signed with --secret or the service's configured
 * secret, and prints it with its details and examples. One implementation, two names: only the
 * program name in its texts differs.
 *
 * Exit status: 0 token issued, or usage printed; 1 a value is wrong or there is no secret (bad
 * duration, empty or ill-formed --id, empty --secret, bad --url, no/unreadable secret, bad
 * TOOLGATE_* variable); 2 the command line itself is not understood (unknown option, stray
 * argument, repeated option, a permission the gateway does not know).
 * Nothing is written to stdout unless a token (or the usage text) is the result.
 */
import { isOAuthTenant, OAUTH_TENANT_PREFIX } from '../shared/auth/oauth-tenant';
import { describeDuration, DurationError, parseDuration } from '../shared/auth/duration';
import { isPermission, PERMISSIONS } from '../shared/auth/permissions';
import { resolveSecret, SECRET_BYTES, SecretFileError, secretFilePath } from '../shared/auth/secret';
import { isWellFormedText, signToken } from '../shared/auth/token';
import { ConfigError, loadConfig, SECRET_FILE_NAME } from '../shared/config';

const OPTIONS = ['id', 'permissions', 'expires', 'secret', 'url'] as const;
type OptionName = (typeof OPTIONS)[number];

const DEFAULTS = {
  id: 'admin',
  permissions: PERMISSIONS.join(','),
  expires: '30d',
  url: 'http://127.0.0.1:3000/',
} as const;

const usage = (program: string) => `Usage: ${program} [options]

Issues a signed access token (JWT, HS256) for toolgate's HTTP endpoint and prints it, followed
by its details and examples of how to send it.

Options:
  --id <user-id>          the token's id (the tenant).  Default: ${DEFAULTS.id}
  --permissions <perms>   comma-separated permissions; each item is trimmed, empty items dropped.
                          Known: ${PERMISSIONS.join(', ')}; any other value is refused
                          Default: ${DEFAULTS.permissions}
  --expires <duration>    lifetime: a whole number and a unit s, m, h, d or w (1h, 7d, 30d).
                          Default: ${DEFAULTS.expires}
  --secret <secret>       signing secret.  Default: the service configuration, i.e.
                          TOOLGATE_JWT_SECRET, else the file ${SECRET_FILE_NAME} in the data directory
                          (TOOLGATE_DATA_DIR, default ./.toolgate) that \`toolgate serve\` creates
  --url <base_url>        base URL used in the printed examples.  Default: ${DEFAULTS.url}
  --help, -h              print this text and exit

An option with no value (last on the line, or followed by another option) takes its default.
A value that begins with "--" must be written as --option=value.
With no arguments at all this text is printed and no token is issued; to issue a token with
every default, give any option, e.g. \`${program} --id ${DEFAULTS.id}\`.`;

/** The command line is not understood: exit 2. */
class UsageError extends Error {}
/** A value is wrong or no token can be signed: exit 1. */
class IssueError extends Error {}

/**
 * Spec rule 1: an absent option, or one that is the last argument with no value, takes its
 * default. We extend "no value" to an option directly followed by another option
 * (`--id --permissions x`): that is the same mistake one position earlier, and reading
 * "--permissions" as the id would issue a token nobody asked for. So an argument beginning with
 * "--" (or "-h") is never taken as a value; `--option=value` spells such a value explicitly.
 */
function parseArgs(argv: readonly string[]): Partial<Record<OptionName, string>> {
  const values: Partial<Record<OptionName, string>> = {};
  const seen = new Set<OptionName>();
  const isOptionLike = (arg: string) => arg.startsWith('--') || arg === '-h';
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('-')) throw new UsageError(`unexpected argument "${arg}"; values follow an option, e.g. --id ${arg}`);
    const eq = arg.startsWith('--') ? arg.indexOf('=') : -1;
    const name = (eq === -1 ? arg : arg.slice(0, eq)).replace(/^--/, '');
    if (!arg.startsWith('--') || !(OPTIONS as readonly string[]).includes(name)) {
      throw new UsageError(`unknown option "${eq === -1 ? arg : arg.slice(0, eq)}"`);
    }
    const option = name as OptionName;
    // Repeating an option is refused rather than "last one wins": `--permissions a --permissions b`
    // reads like a union, and silently dropping `a` would issue the wrong token.
    if (seen.has(option)) throw new UsageError(`--${option} is given more than once`);
    seen.add(option);
    if (eq !== -1) values[option] = arg.slice(eq + 1);
    else {
      const next = argv[i + 1];
      if (next !== undefined && !isOptionLike(next)) {
        values[option] = next;
        i++;
      }
    }
  }
  return values;
}

/** Items trimmed, empty ones dropped, duplicates dropped (order kept). */
function parsePermissions(list: string): string[] {
  return [
    ...new Set(
      list
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s.length > 0),
    ),
  ];
}

function parseBaseUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new IssueError(`--url "${raw}" is not a URL; give the base URL, e.g. ${DEFAULTS.url}`);
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.search !== '' || url.hash !== '') {
    throw new IssueError(`--url "${raw}" must be an http:// or https:// base URL without a query or fragment`);
  }
  // Spec §4: the call is a POST to {base_url}/.
  return url.href.endsWith('/') ? url.href : `${url.href}/`;
}

const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
const isoSeconds = (seconds: number) => new Date(seconds * 1000).toISOString().replace('.000Z', 'Z');

function render(token: string, id: string, permissions: readonly string[], exp: number, lifetime: number, url: string): string {
  const body = '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}';
  return `${token}

Token details
  User ID:      ${id}
  Permissions:  ${permissions.length > 0 ? permissions.join(', ') : '(none)'}
  Expires:      ${isoSeconds(exp)} (in ${describeDuration(lifetime)})

Usage examples
  HTTP header:
    Authorization: Bearer ${token}

  curl:
    curl -X POST ${shellQuote(url)} \\
      -H ${shellQuote(`Authorization: Bearer ${token}`)} \\
      -H 'Content-Type: application/json' \\
      -d ${shellQuote(body)}

  JavaScript (fetch):
    const response = await fetch(${JSON.stringify(url)}, {
      method: "POST",
      headers: { Authorization: ${JSON.stringify(`Bearer ${token}`)}, "Content-Type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
    });
    console.log(await response.json());

  Behind toolgate's reverse proxy, also send the proxy's API key header (X-API-Key).
`;
}

function issue(argv: readonly string[], program: string): void {
  const warn = (text: string) => process.stderr.write(`${program}: warning: ${text}\n`);
  const values = parseArgs(argv);
  const id = values.id ?? DEFAULTS.id;
  if (id.length === 0) throw new IssueError('--id needs a non-empty value');
  if (!isWellFormedText(id)) throw new IssueError('--id is not well-formed Unicode (it holds a lone UTF-16 surrogate); the gateway refuses such ids');
  if (isOAuthTenant(id))
    throw new IssueError(`--id must not start with "${OAUTH_TENANT_PREFIX}": that prefix names OAuth tenants, and the gateway refuses such a token`);
  const expires = values.expires ?? DEFAULTS.expires;
  const lifetime = parseDuration(expires);
  const url = parseBaseUrl(values.url ?? DEFAULTS.url);

  const permissions = parsePermissions(values.permissions ?? DEFAULTS.permissions);
  const unknown = permissions.filter((p) => !isPermission(p));
  if (unknown.length > 0) {
    // Refused rather than signed: the gateway rejects any token carrying a value it does not
    // know, so such a token could only fail later, far from the typo that made it.
    throw new UsageError(
      `unknown permission ${unknown.map((p) => JSON.stringify(p)).join(', ')} in --permissions; known: ${PERMISSIONS.join(', ')}. ` +
        'The gateway rejects tokens with unknown permission values, so no token was issued.',
    );
  }
  if (permissions.length === 0) warn('the token grants no permissions; it can call no tool');

  let secret = values.secret;
  if (secret === '') throw new IssueError('--secret needs a non-empty value');
  if (secret === undefined) {
    const config = loadConfig();
    secret = resolveSecret(config);
    if (secret === undefined) {
      throw new IssueError(
        `no signing secret is configured. Pass --secret, set TOOLGATE_JWT_SECRET, or start \`toolgate serve\` ` +
          `once so it creates ${secretFilePath(config.dataDir)}. ${program} never creates a secret itself: ` +
          `the server would not know it.`,
      );
    }
  }
  if (Buffer.byteLength(secret) < SECRET_BYTES) {
    warn(`the secret is shorter than ${SECRET_BYTES} bytes; HS256 keys should be at least 256 bits (RFC 7518 §3.2)`);
  }

  const iat = Math.floor(Date.now() / 1000);
  const exp = iat + lifetime;
  const token = signToken({ id, permissions, iat, exp }, secret);
  process.stdout.write(render(token, id, permissions, exp, lifetime, url));
}

/** Runs the issuer under the name `program` (in its usage and messages); returns the exit status. */
export function runTokenCli(argv: readonly string[], program: string): number {
  // Spec rule 2 and --help/-h: usage on stdout, status 0, no token.
  if (argv.length === 0 || argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(usage(program) + '\n');
    return 0;
  }
  try {
    issue(argv, program);
    return 0;
  } catch (err) {
    const expected = [UsageError, IssueError, DurationError, ConfigError, SecretFileError].some((kind) => err instanceof kind);
    const message = err instanceof Error ? err.message : String(err);
    process.stderr.write(`${program}: ${expected ? '' : 'unexpected error: '}${message}\n`);
    if (err instanceof UsageError) {
      process.stderr.write(`Run \`${program} --help\` for the options.\n`);
      return 2;
    }
    return 1;
  }
}

/** The usage text under a program name (for `toolgate token --help` via the command table). */
export const tokenUsage = usage;
