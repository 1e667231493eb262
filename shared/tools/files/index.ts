/** The file tools, in the order tools/list shows them. */
import type { AnyTool } from '../tool';
import { listDirectory } from './list-directory';
import { readFile } from './read-file';
import { writeFile } from './write-file';

export const FILE_TOOLS = [readFile, writeFile, listDirectory] as unknown as readonly AnyTool[];
