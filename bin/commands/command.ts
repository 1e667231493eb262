/** A `toolgate` subcommand: its usage text and what it runs. Each lives in its own file. */
import type { Config } from '../../shared/config';
import type { Logger } from '../../shared/log';

export interface Command {
  summary: string;
  usage: string;
  /** Resolves with the exit code. Throws UsageError for bad flags. */
  run?(argv: readonly string[], config: Readonly<Config>, log: Logger): Promise<number>;
  /**
   * A command that reads its own configuration and handles its own --help and errors (the token
   * issuer, whose rules generate-token fixes): run instead of `run`, with nothing loaded first.
   */
  standalone?(argv: readonly string[]): number;
}
