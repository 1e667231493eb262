/** The file tools, in the order tools/list shows them. */
import type { AnyTool } from '../tool';
import { createDirectory } from './create-directory';
import { deletePath } from './delete-path';
import { directoryTree } from './directory-tree';
import { editFile } from './edit-file';
import { getFileInfo } from './get-file-info';
import { listDirectory } from './list-directory';
import { movePath } from './move-path';
import { readFile } from './read-file';
import { readMultipleFiles } from './read-multiple-files';
import { searchFiles } from './search-files';
import { searchText } from './search-text';
import { writeFile } from './write-file';

export const FILE_TOOLS = [
  readFile,
  readMultipleFiles,
  searchText,
  listDirectory,
  directoryTree,
  searchFiles,
  getFileInfo,
  writeFile,
  editFile,
  createDirectory,
  movePath,
  deletePath,
] as unknown as readonly AnyTool[];
