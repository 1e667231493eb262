/** The command tools (system:exec), run inside the sandbox agent. */
import type { AnyTool } from '../tool';
import { killProcess } from './kill-process';
import { listProcesses } from './list-processes';
import { readProcessOutput } from './read-process-output';
import { runCommand } from './run-command';
import { startProcess } from './start-process';
import { writeProcessInput } from './write-process-input';

export const COMMAND_TOOLS = [runCommand, startProcess, readProcessOutput, writeProcessInput, killProcess, listProcesses] as unknown as readonly AnyTool[];
