/**
 * Tests call sandboxes (and tenant pools) with raw arguments; a sandbox runs arguments its caller
 * parsed (executor/sandbox/backend.ts). These parse them first, in this process, as the
 * executor's job handler does.
 */
import type { Sandbox, SandboxBackend } from '../../executor/sandbox/backend';
import { callParsing } from '../../executor/sandbox/sandbox-tools';

/** `sandbox`, parsing each call's arguments before it goes in. */
export function parsing(sandbox: Sandbox): Sandbox {
  return {
    call: (tool, args, signal, onProgress) => callParsing(sandbox, tool, args, signal, onProgress),
    get alive() {
      return sandbox.alive;
    },
    exited: sandbox.exited,
    processEnded: (handle) => sandbox.processEnded(handle),
    stop: () => sandbox.stop(),
  };
}

/** `backend`, whose sandboxes parse each call's arguments before it goes in. */
export function parsingBackend(backend: SandboxBackend): SandboxBackend {
  return {
    name: backend.name,
    isolating: backend.isolating,
    start: async (spec) => parsing(await backend.start(spec)),
    ...(backend.warm ? { warm: (limits) => backend.warm!(limits) } : {}),
    ...(backend.close ? { close: () => backend.close!() } : {}),
  };
}
