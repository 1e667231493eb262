/** The sandbox's table of long-running processes (start_process and friends). Filled in by the commands tools. */
// eslint-disable-next-line @typescript-eslint/no-empty-interface
export interface ProcessHost {
  /** Ends every process; called when the sandbox agent stops. */
  closeAll(): void;
}
