/**
 * Published tool schemas are read by model APIs as well as by MCP clients: a client hands
 * `inputSchema` to its model's function-calling API, whose schema dialect is a subset of JSON
 * Schema (OpenAI's strict structured outputs, Gemini's OpenAPI 3.0 subset, Anthropic's tool
 * schemas). This rewrites what zod emits into that common subset without changing what it
 * accepts: the server still checks every argument against the full zod schema, so a constraint
 * left out here is enforced all the same (and named in the field's description where a model
 * needs it). What the subset excludes is listed, and checked on every published schema, in
 * test/tools/schema-portability.test.ts; shapes that cannot be rewritten (a nullable field, a
 * recursive one) are written portably in the tool itself.
 */

type Schema = Record<string, unknown>;

const isSchema = (v: unknown): v is Schema => typeof v === 'object' && v !== null && !Array.isArray(v);

export function portableSchema(schema: Schema): Schema {
  const out: Schema = {};
  for (const [key, value] of Object.entries(schema)) {
    switch (key) {
      // Which keys a map takes: Gemini and OpenAI's strict mode know no such keyword.
      case 'propertyNames':
        break;
      case 'properties':
        out[key] = isSchema(value) ? Object.fromEntries(Object.entries(value).map(([name, s]) => [name, isSchema(s) ? portableSchema(s) : s])) : value;
        break;
      case 'items':
        out[key] = isSchema(value) ? portableSchema(value) : value;
        break;
      case 'additionalProperties':
        // `{}` allows anything, as leaving the keyword out does, and is a schema without a type.
        if (isSchema(value) && Object.keys(value).length === 0) break;
        out[key] = isSchema(value) ? portableSchema(value) : value;
        break;
      case 'anyOf':
        out[key] = Array.isArray(value) ? value.map((s) => (isSchema(s) ? portableSchema(s) : s)) : value;
        break;
      default:
        out[key] = value;
    }
  }
  return out.type === 'integer' ? inclusiveBounds(out) : out;
}

/**
 * Integer bounds written inclusively (`minimum: 1` for zod's `exclusiveMinimum: 0`): OpenAPI 3.0,
 * Gemini's dialect, reads `exclusiveMinimum` as a boolean. The safe-integer range zod adds to
 * every `.int()` says nothing a model can use, and is left out.
 */
function inclusiveBounds(schema: Schema): Schema {
  const { exclusiveMinimum, exclusiveMaximum, ...rest } = schema;
  if (typeof exclusiveMinimum === 'number') rest.minimum = Math.max(Math.floor(exclusiveMinimum) + 1, numberOr(rest.minimum, -Infinity));
  if (typeof exclusiveMaximum === 'number') rest.maximum = Math.min(Math.ceil(exclusiveMaximum) - 1, numberOr(rest.maximum, Infinity));
  if (numberOr(rest.minimum, 0) <= Number.MIN_SAFE_INTEGER) delete rest.minimum;
  if (numberOr(rest.maximum, 0) >= Number.MAX_SAFE_INTEGER) delete rest.maximum;
  return rest;
}

const numberOr = (v: unknown, fallback: number): number => (typeof v === 'number' ? v : fallback);
