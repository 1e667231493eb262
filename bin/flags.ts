/** A small flag parser for toolgate's subcommands: `--name value`, `--name=value`, and booleans. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

export interface FlagSpec {
  /** Flags that take a value. */
  values: readonly string[];
  /** Flags that stand alone. */
  booleans?: readonly string[];
}

export function parseFlags(argv: readonly string[], spec: FlagSpec): Map<string, string | true> {
  const out = new Map<string, string | true>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('--')) throw new UsageError(`unexpected argument "${arg}"`);
    const eq = arg.indexOf('=');
    const name = eq === -1 ? arg.slice(2) : arg.slice(2, eq);
    if (spec.booleans?.includes(name)) {
      if (eq !== -1) throw new UsageError(`--${name} takes no value`);
      out.set(name, true);
    } else if (spec.values.includes(name)) {
      const value = eq === -1 ? argv[++i] : arg.slice(eq + 1);
      if (value === undefined || value === '') throw new UsageError(`--${name} needs a value`);
      out.set(name, value);
    } else throw new UsageError(`unknown option --${name}`);
  }
  return out;
}

/**
 * A flag that stands for one configuration variable: `--port 8080` is `TOOLGATE_PORT=8080` for
 * this run, and wins over the environment. The composition root turns such flags into variables
 * before the one config parse (shared/config.ts), so a setting has one parser and one set of
 * rules however it is given.
 */
export interface SettingFlag {
  /** The flag's name without `--`. */
  flag: string;
  /** The variable it sets. */
  env: string;
  /** The value's placeholder in the help (`N`, `DIR`). */
  value: string;
  /** The help text's lines, without indentation. */
  help: readonly string[];
}

/**
 * Takes the setting flags out of a command line: returns them as variables, and the arguments
 * left for the command's own parser. A setting given twice is refused (which one was meant?).
 */
export function takeSettingFlags(argv: readonly string[], settings: readonly SettingFlag[]): { env: Record<string, string>; rest: string[] } {
  const env: Record<string, string> = {};
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const eq = arg.indexOf('=');
    const name = arg.startsWith('--') ? (eq === -1 ? arg.slice(2) : arg.slice(2, eq)) : undefined;
    const setting = settings.find((s) => s.flag === name);
    if (!setting) {
      rest.push(arg);
      continue;
    }
    const value = eq === -1 ? argv[++i] : arg.slice(eq + 1);
    if (value === undefined || value === '' || (eq === -1 && value.startsWith('--'))) throw new UsageError(`--${setting.flag} needs a value`);
    if (Object.hasOwn(env, setting.env)) throw new UsageError(`--${setting.flag} is given more than once`);
    env[setting.env] = value;
  }
  return { env, rest };
}

/** A configuration message about a variable a flag set, reworded to name the flag the user typed. */
export function nameSettingFlags(message: string, settings: readonly SettingFlag[], given: Readonly<Record<string, string>>): string {
  let out = message;
  for (const s of settings) if (Object.hasOwn(given, s.env)) out = out.replace(new RegExp(`\\b${s.env}\\b`, 'g'), `--${s.flag}`);
  return out;
}

/** The help's option lines: the flag and the variable it stands for, then what it sets, indented below. */
export function settingsHelp(settings: readonly SettingFlag[]): string {
  const flagWidth = Math.max(...settings.map((s) => s.flag.length + s.value.length + 3)) + 2;
  return settings.map((s) => [`  ${`--${s.flag} ${s.value}`.padEnd(flagWidth)}${s.env}`, ...s.help.map((line) => `      ${line}`)].join('\n')).join('\n');
}
