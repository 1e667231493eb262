/** A bad TOOLGATE_* value: start-up stops with this sentence, which names the variable. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}
