/**
 * The one spelling of a secret outside the trusted side: `{{secret:NAME}}`. The model writes it
 * in http_request headers; a sandbox's commands see it as the value of the variable NAME and send
 * it through the egress proxy. Only the executor and its proxy ever replace it with the value.
 *
 * NAME is an environment variable name (`^[A-Z_][A-Z0-9_]{0,63}$`), so each secret is also a
 * variable a tool may insist on (GITHUB_TOKEN, NPM_TOKEN).
 */

export const SECRET_NAME = /^[A-Z_][A-Z0-9_]{0,63}$/;

const NAME_PART = '[A-Z_][A-Z0-9_]{0,63}';
/** The placeholder as written. */
const PLAIN = new RegExp(`\\{\\{secret:(${NAME_PART})\\}\\}`, 'g');
/**
 * The placeholder as written or percent-encoded (`%7B%7Bsecret%3ANAME%7D%7D`), which is how some
 * clients spell a password from a URL's userinfo before they put it in Basic credentials.
 */
const PLAIN_OR_ENCODED = new RegExp(`(?:\\{\\{|%7[bB]%7[bB])secret(?::|%3[aA])(${NAME_PART})(?:\\}\\}|%7[dD]%7[dD])`, 'g');

export const placeholder = (name: string): string => `{{secret:${name}}}`;

/** The names of the placeholders in `text`, in order, without repeats. */
export function placeholderNames(text: string): string[] {
  return [...new Set([...text.matchAll(PLAIN)].map((m) => m[1] as string))];
}

/** True when `text` holds a placeholder, as written or percent-encoded. */
export function hasPlaceholder(text: string): boolean {
  PLAIN_OR_ENCODED.lastIndex = 0;
  return PLAIN_OR_ENCODED.test(text);
}

/**
 * Replaces each placeholder whose name `value` answers (undefined: left as written). The
 * percent-encoded spelling is replaced too when `encoded` is set (inside Basic credentials).
 */
export function replacePlaceholders(text: string, value: (name: string) => string | undefined, encoded = false): string {
  return text.replace(encoded ? PLAIN_OR_ENCODED : PLAIN, (whole, name: string) => value(name) ?? whole);
}

/** Each name as a variable whose value is its own placeholder: what a sandbox's commands see. */
export function placeholderEnv(names: Iterable<string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of names) if (SECRET_NAME.test(name)) env[name] = placeholder(name);
  return env;
}
