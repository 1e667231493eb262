/** The bench command line: `run.js [--quick] [--only a,b] [--list] [--out DIR] [--no-write]`. */
export interface BenchArgs {
  quick: boolean;
  only: string[] | undefined;
  list: boolean;
  out: string | undefined;
  write: boolean;
}

export const BENCH_USAGE = `Usage: npm run bench -- [--quick] [--only NAME[,NAME…]] [--list] [--out DIR] [--no-write]

  --quick        fewer calls and rounds (1–1.5 min of measuring on a busy 2-core machine)
  --only NAMES   run only these benchmarks (see --list)
  --list         print the benchmarks and whether each can run here, then exit
  --out DIR      where the report goes (default bench/results)
  --no-write     print the table only`;

export function parseArgs(argv: readonly string[]): BenchArgs {
  const args: BenchArgs = { quick: false, only: undefined, list: false, out: undefined, write: true };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const [flag, inline] = a.includes('=') ? [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)] : [a, undefined];
    const value = () => {
      const v = inline ?? argv[++i];
      if (v === undefined || v.startsWith('--')) throw new Error(`${flag} needs a value\n\n${BENCH_USAGE}`);
      return v;
    };
    switch (flag) {
      case '--quick':
        args.quick = true;
        break;
      case '--only':
        args.only = [
          ...(args.only ?? []),
          ...value()
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean),
        ];
        break;
      case '--list':
        args.list = true;
        break;
      case '--out':
        args.out = value();
        break;
      case '--no-write':
        args.write = false;
        break;
      case '--help':
      case '-h':
        throw new Error(BENCH_USAGE);
      default:
        throw new Error(`unknown option ${a}\n\n${BENCH_USAGE}`);
    }
  }
  return args;
}
