/**
 * Every limit a tool enforces, with its default. Each is configurable through the environment
 * variable named beside it (parsed once in config.ts) and documented in the README.
 */
export interface ToolLimits {
  /** TOOLGATE_MAX_PATH_LENGTH: longest path accepted, in bytes. */
  maxPathLength: number;
  /** TOOLGATE_MAX_READ_BYTES: most bytes read_file returns before `truncated`. */
  maxReadBytes: number;
  /** TOOLGATE_MAX_WRITE_BYTES: largest content write_file accepts. */
  maxWriteBytes: number;
  /** TOOLGATE_MAX_MULTIPLE_FILES: most paths in one read_multiple_files call. */
  maxMultipleFiles: number;
  /** TOOLGATE_MAX_LIST_ENTRIES: most entries list_directory returns before `truncated`. */
  maxListEntries: number;
  /** TOOLGATE_MAX_TREE_ENTRIES: most entries directory_tree / search_files return. */
  maxTreeEntries: number;
  /** TOOLGATE_MAX_TREE_DEPTH: deepest level directory_tree / search walks. */
  maxTreeDepth: number;
  /** TOOLGATE_MAX_SEARCH_RESULTS: most matches search_text returns. */
  maxSearchResults: number;
  /** TOOLGATE_MAX_SEARCH_FILE_BYTES: files larger than this are skipped by search_text. */
  maxSearchFileBytes: number;
  /** TOOLGATE_SEARCH_TIMEOUT_MS: longest a search_text / search_files call may run before returning what it found (`truncated`). */
  searchTimeoutMs: number;
  /** TOOLGATE_COMMAND_TIMEOUT_MS: run_command's default timeout. */
  commandTimeoutMs: number;
  /** TOOLGATE_MAX_COMMAND_TIMEOUT_MS: the largest timeout a caller may ask for. */
  maxCommandTimeoutMs: number;
  /** TOOLGATE_MAX_OUTPUT_BYTES: output kept per stream of run_command (its first and last halves) before `truncated`. */
  maxOutputBytes: number;
  /** TOOLGATE_MAX_COMMAND_OUTPUT_BYTES: output run_command may produce (both streams together) before it is stopped. */
  maxCommandOutputBytes: number;
  /** TOOLGATE_MAX_PROCESS_BUFFER_BYTES: output kept per start_process handle (the latest bytes: a ring). */
  maxProcessBufferBytes: number;
  /** TOOLGATE_MAX_PROCESSES: most live start_process handles per sandbox. */
  maxProcesses: number;
  /** TOOLGATE_HTTP_TIMEOUT_MS: http_request's default timeout. */
  httpTimeoutMs: number;
  /** TOOLGATE_HTTP_MAX_TIMEOUT_MS: the largest timeout a caller may ask for. */
  httpMaxTimeoutMs: number;
  /** TOOLGATE_HTTP_MAX_BYTES: most response bytes http_request keeps before `truncated`. */
  httpMaxBytes: number;
  /** TOOLGATE_HTTP_MAX_REDIRECTS: most redirects http_request follows. */
  httpMaxRedirects: number;
}

export const DEFAULT_LIMITS: Readonly<ToolLimits> = Object.freeze({
  maxPathLength: 4096,
  maxReadBytes: 1024 * 1024,
  maxWriteBytes: 4 * 1024 * 1024,
  maxMultipleFiles: 64,
  maxListEntries: 1000,
  maxTreeEntries: 2000,
  maxTreeDepth: 16,
  maxSearchResults: 500,
  maxSearchFileBytes: 1024 * 1024,
  searchTimeoutMs: 10_000,
  commandTimeoutMs: 30_000,
  maxCommandTimeoutMs: 600_000,
  maxOutputBytes: 1024 * 1024,
  maxCommandOutputBytes: 64 * 1024 * 1024,
  maxProcessBufferBytes: 4 * 1024 * 1024,
  maxProcesses: 16,
  httpTimeoutMs: 30_000,
  httpMaxTimeoutMs: 120_000,
  httpMaxBytes: 5 * 1024 * 1024,
  httpMaxRedirects: 5,
});

/** The environment variable that sets each limit (the README table is generated from this list). */
export const LIMIT_ENV: Readonly<Record<keyof ToolLimits, string>> = Object.freeze({
  maxPathLength: 'TOOLGATE_MAX_PATH_LENGTH',
  maxReadBytes: 'TOOLGATE_MAX_READ_BYTES',
  maxWriteBytes: 'TOOLGATE_MAX_WRITE_BYTES',
  maxMultipleFiles: 'TOOLGATE_MAX_MULTIPLE_FILES',
  maxListEntries: 'TOOLGATE_MAX_LIST_ENTRIES',
  maxTreeEntries: 'TOOLGATE_MAX_TREE_ENTRIES',
  maxTreeDepth: 'TOOLGATE_MAX_TREE_DEPTH',
  maxSearchResults: 'TOOLGATE_MAX_SEARCH_RESULTS',
  maxSearchFileBytes: 'TOOLGATE_MAX_SEARCH_FILE_BYTES',
  searchTimeoutMs: 'TOOLGATE_SEARCH_TIMEOUT_MS',
  commandTimeoutMs: 'TOOLGATE_COMMAND_TIMEOUT_MS',
  maxCommandTimeoutMs: 'TOOLGATE_MAX_COMMAND_TIMEOUT_MS',
  maxOutputBytes: 'TOOLGATE_MAX_OUTPUT_BYTES',
  maxCommandOutputBytes: 'TOOLGATE_MAX_COMMAND_OUTPUT_BYTES',
  maxProcessBufferBytes: 'TOOLGATE_MAX_PROCESS_BUFFER_BYTES',
  maxProcesses: 'TOOLGATE_MAX_PROCESSES',
  httpTimeoutMs: 'TOOLGATE_HTTP_TIMEOUT_MS',
  httpMaxTimeoutMs: 'TOOLGATE_HTTP_MAX_TIMEOUT_MS',
  httpMaxBytes: 'TOOLGATE_HTTP_MAX_BYTES',
  httpMaxRedirects: 'TOOLGATE_HTTP_MAX_REDIRECTS',
});
