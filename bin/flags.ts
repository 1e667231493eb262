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
