import { inProcessBackend } from '../../executor/sandbox/in-process';
import { sandboxBackendContract } from './sandbox-backend.suite';

// `none` as the embedded executor runs it: the sandbox tools in this process (in-process.ts).
sandboxBackendContract('none in-process', { backend: () => inProcessBackend(), inProcess: true });
