/**
 * The explicit list of every tool toolgate offers. Adding a tool: its file, plus one line in its
 * family's index (files/, commands/, http/).
 */
import { COMMAND_TOOLS } from './commands/index';
import { FILE_TOOLS } from './files/index';
import { HTTP_TOOLS } from './http/index';
import type { AnyTool } from './tool';

export const ALL_TOOLS: readonly AnyTool[] = [...FILE_TOOLS, ...COMMAND_TOOLS, ...HTTP_TOOLS];
