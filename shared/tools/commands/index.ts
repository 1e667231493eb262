/** The command tools (system:exec), run inside the sandbox agent. */
import type { AnyTool } from '../tool';

export const COMMAND_TOOLS: readonly AnyTool[] = [];
