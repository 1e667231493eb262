/** The HTTP tool (network:http), run in the trusted process behind the SSRF guard. */
import type { AnyTool } from '../tool';
import { httpRequest } from './http-request';

export const HTTP_TOOLS = [httpRequest] as unknown as readonly AnyTool[];
