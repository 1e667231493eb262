import { noneBackend } from '../../executor/sandbox/none';
import { sandboxBackendContract } from './sandbox-backend.suite';

sandboxBackendContract('none', { backend: () => noneBackend() });
