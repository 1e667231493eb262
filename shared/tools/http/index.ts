/** The HTTP tool (network:http), run in the trusted process behind the SSRF guard. */
import type { AnyTool } from '../tool';

export const HTTP_TOOLS: readonly AnyTool[] = [];
