/**
 * The load test's calls and how each reply is judged. Every call carries a value no other call
 * carries (run id, caller, sequence number) and its reply must echo it back:
 *
 *   write_file      load/c<k>/<value>/value.txt ← value   reply: that path, byte count of value
 *   read_file       the caller's last written file        reply: content === that write's value
 *   list_directory  the caller's last written directory   reply: that path, exactly [value.txt]
 *   run_command     echo <value> >> ledger.txt; echo <value>
 *                                                         reply: stdout === value + "\n", exit 0
 *
 * A caller cycles write → read → list → run, so 64 callers keep every tool in flight at once.
 * A reply with another request's id, or one that echoes anything but its own value, is
 * "crossed"; a request with no reply (timeout, connection dropped) is "lost"; a JSON-RPC error,
 * an `isError` result or a non-200 status is an "error". Each command also appends its value to
 * the tenant's ledger.txt, so a command that ran twice shows as a line written twice.
 */

export type LoadTool = 'write_file' | 'read_file' | 'list_directory' | 'run_command';
export const LOAD_TOOLS: readonly LoadTool[] = ['write_file', 'read_file', 'list_directory', 'run_command'];

export type Outcome = 'ok' | 'error' | 'crossed' | 'lost';

/** Where every load command appends its value, in the tenant's workspace. */
export const LEDGER = 'ledger.txt';

export interface PlannedCall {
  tool: LoadTool;
  /** The JSON-RPC id: unique in the run. */
  id: string;
  args: Record<string, unknown>;
  /** The line a run_command appends to the ledger. */
  ledgerLine?: string;
  /** Judges the parsed `result` of a reply with this call's id: undefined if it echoes correctly, else why not. */
  check(result: Record<string, unknown>): string | undefined;
}

/** One caller's sequence of calls: its own directory, its own values. */
export class CallerScript {
  private step = 0;
  private lastWrite: { dir: string; value: string } | undefined;
  /** The write before the last one: read again if the last one failed. */
  private previousWrite: { dir: string; value: string } | undefined;

  constructor(
    private readonly runId: string,
    private readonly caller: number,
  ) {}

  next(): PlannedCall {
    const seq = this.step++;
    const value = `${this.runId}-${this.caller}-${seq}`;
    const id = `load-${value}`;
    const tool = this.lastWrite ? LOAD_TOOLS[seq % LOAD_TOOLS.length]! : 'write_file';
    switch (tool) {
      case 'write_file': {
        const dir = `load/c${this.caller}/${value}`;
        const file = `${dir}/value.txt`;
        this.previousWrite = this.lastWrite;
        this.lastWrite = { dir, value };
        return {
          tool,
          id,
          args: { path: file, content: value },
          check: (r) => {
            const s = structured(r);
            if (s?.path !== file) return `write_file answered path ${JSON.stringify(s?.path)}, not ${file}`;
            if (s.bytesWritten !== Buffer.byteLength(value)) return `write_file wrote ${String(s.bytesWritten)} bytes, not ${Buffer.byteLength(value)}`;
            return undefined;
          },
        };
      }
      case 'read_file': {
        const { dir, value: written } = this.lastWrite!;
        const file = `${dir}/value.txt`;
        return {
          tool,
          id,
          args: { path: file },
          check: (r) => {
            const s = structured(r);
            if (s?.content !== written) return `read_file of ${file} gave ${JSON.stringify(s?.content)?.slice(0, 80)}, not ${written}`;
            return undefined;
          },
        };
      }
      case 'list_directory': {
        const { dir } = this.lastWrite!;
        return {
          tool,
          id,
          args: { path: dir },
          check: (r) => {
            const s = structured(r);
            const names = Array.isArray(s?.entries) ? (s.entries as Array<{ name?: unknown }>).map((e) => e.name) : undefined;
            if (s?.path !== dir) return `list_directory answered path ${JSON.stringify(s?.path)}, not ${dir}`;
            if (JSON.stringify(names) !== '["value.txt"]') return `list_directory of ${dir} listed ${JSON.stringify(names)?.slice(0, 80)}`;
            return undefined;
          },
        };
      }
      case 'run_command':
        return echoCall(id, value);
    }
  }

  /** After `call` was answered: a write that failed (an honest error under faults) is not read back. */
  settled(call: PlannedCall, ok: boolean): void {
    if (!ok && call.tool === 'write_file' && this.lastWrite && call.args.content === this.lastWrite.value) this.lastWrite = this.previousWrite;
  }
}

/** run_command `echo <value>` (after appending it to the ledger), whose stdout must be exactly the value. */
export function echoCall(id: string, value: string): PlannedCall {
  return {
    tool: 'run_command',
    id,
    args: { command: `echo ${value} >> ${LEDGER}; echo ${value}` },
    ledgerLine: value,
    check: (r) => {
      const s = structured(r);
      if (s?.stdout !== `${value}\n` || s.exitCode !== 0)
        return `echo ${value} gave stdout ${JSON.stringify(s?.stdout)?.slice(0, 80)}, exit ${String(s?.exitCode)}`;
      return undefined;
    },
  };
}

function structured(result: Record<string, unknown>): Record<string, unknown> | undefined {
  const s = result.structuredContent;
  return typeof s === 'object' && s !== null ? (s as Record<string, unknown>) : undefined;
}

export interface Verdict {
  outcome: Outcome;
  detail?: string;
  /** For an error: the JSON-RPC error code, `isError` (a tool's failure) or `HTTP <status>`. */
  code?: string;
}

/** Classifies one HTTP answer to `call` (status and body text). */
export function judge(call: PlannedCall, status: number, body: string): Verdict {
  let reply: unknown;
  try {
    reply = JSON.parse(body);
  } catch {
    return { outcome: 'error', code: `HTTP ${status}`, detail: `HTTP ${status}, not JSON: ${body.slice(0, 120)}` };
  }
  if (typeof reply !== 'object' || reply === null || Array.isArray(reply))
    return { outcome: 'error', code: `HTTP ${status}`, detail: `HTTP ${status}, not a JSON-RPC response: ${body.slice(0, 120)}` };
  const r = reply as { id?: unknown; result?: unknown; error?: { code?: unknown; message?: unknown } };
  // A reply addressed to another request is crossed whatever it says; a null id is the server's
  // refusal of the whole request (401, 413, …), an error.
  if (r.id !== null && r.id !== call.id) return { outcome: 'crossed', detail: `the reply to ${call.id} carried id ${JSON.stringify(r.id)}` };
  if (r.error !== undefined)
    return { outcome: 'error', code: String(r.error.code), detail: `HTTP ${status}, ${String(r.error.code)} ${String(r.error.message).slice(0, 160)}` };
  if (status !== 200 || typeof r.result !== 'object' || r.result === null)
    return { outcome: 'error', code: `HTTP ${status}`, detail: `HTTP ${status}: ${body.slice(0, 120)}` };
  const result = r.result as Record<string, unknown>;
  if (result.isError === true) return { outcome: 'error', code: 'isError', detail: `${call.tool} isError: ${JSON.stringify(result.content).slice(0, 160)}` };
  const wrong = call.check(result);
  return wrong === undefined ? { outcome: 'ok' } : { outcome: 'crossed', detail: wrong };
}
