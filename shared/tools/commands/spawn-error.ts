/** A failed spawn as a sentence the model can act on. */
import { ToolError } from '../../protocol/errors';

export function spawnError(err: unknown, file: string): ToolError {
  switch ((err as NodeJS.ErrnoException | undefined)?.code) {
    case 'ENOENT':
      return new ToolError(`Command not found: ${file}`);
    case 'EACCES':
      return new ToolError(`Permission denied: ${file} is not executable`);
    case 'E2BIG':
      return new ToolError('Arguments and environment are too large to start a process');
    case 'EAGAIN':
    case 'EMFILE':
    case 'ENFILE':
    case 'ENOMEM':
      return new ToolError('The sandbox cannot start another process right now (out of processes, files or memory)');
    default:
      // Nothing the model can act on, so the sentence stays short; the cause goes to the log.
      return new ToolError(`Could not start ${file}`, { cause: err });
  }
}
