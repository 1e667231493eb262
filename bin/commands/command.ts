/** A `toolgate` subcommand: its usage text and what it runs. Each lives in its own file. */
import type { Config } from '../../shared/config';
import type { Logger } from '../../shared/log';

export interface Command {
  summary: string;
  usage: string;
  /** Resolves with the exit code. Throws UsageError for bad flags. */
  run(argv: readonly string[], config: Readonly<Config>, log: Logger): Promise<number>;
}
