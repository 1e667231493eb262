/** Builders for MCP tool results, so every tool shapes them the same way. */
import type { ToolResult } from './tool';

export const textResult = (text: string): ToolResult => ({ content: [{ type: 'text', text }] });

/** A structured result: the object as structuredContent, and as text for clients that read only text. */
export function structuredResult(value: Record<string, unknown>, text: string = JSON.stringify(value)): ToolResult {
  return { content: [{ type: 'text', text }], structuredContent: value };
}

/** A tool failure the model can read and act on. */
export const errorResult = (message: string): ToolResult => ({ content: [{ type: 'text', text: message }], isError: true });
