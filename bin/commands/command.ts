/** A `toolgate` subcommand: its usage text and what it runs. Each lives in its own file. */
import type { Config } from '../../shared/config';
import type { Logger } from '../../shared/log';
import type { SettingFlag } from '../flags';

export interface Command {
  summary: string;
  usage: string;
  /**
   * Flags that stand for configuration variables (`--port` for TOOLGATE_PORT): the composition
   * root applies them over the environment before parsing the config, and passes `run` the rest.
   */
  settings?: readonly SettingFlag[];
  /** Resolves with the exit code. Throws UsageError for bad flags. */
  run?(argv: readonly string[], config: Readonly<Config>, log: Logger): Promise<number>;
  /**
   * A command that reads its own configuration and handles its own --help and errors (the token
   * issuer, whose rules generate-token fixes): run instead of `run`, with nothing loaded first.
   */
  standalone?(argv: readonly string[]): number;
}
