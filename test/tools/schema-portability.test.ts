/**
 * Every published schema (tools/list, every tool, input and output) stays inside the JSON Schema
 * subset the major model APIs' tool dialects accept: OpenAI's structured outputs, Gemini's
 * OpenAPI 3.0 subset, Anthropic's tool schemas, and the MCP Inspector's portability lint. Each
 * rule below names what it refuses and who refuses it; a finding names the tool, the schema and
 * the JSON path, so a new tool that breaks one says where.
 *
 * Not enforced: OpenAI's strict mode also wants every property required and no open maps;
 * optional arguments and `env`/`headers` maps are the tools' contract, and a client sending our
 * schemas with `strict: false` (the default for function calling) is served by them as they are.
 */
import { ALL_TOOLS } from '../../shared/tools/index';
import { portableSchema } from '../../shared/tools/portable-schema';
import { memoryPeer } from '../protocol/memory-peer';
import { call } from '../protocol/wire';

type Schema = Record<string, unknown>;
const isSchema = (v: unknown): v is Schema => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Keywords some dialect refuses, each with the reason. */
const REFUSED: Record<string, string> = {
  $ref: 'references: Gemini refuses them (a recursive shape is written out instead)',
  $defs: 'definitions: Gemini refuses them',
  definitions: 'definitions: Gemini refuses them',
  $schema: 'a dialect tag inside a tool schema: MCP clients and model APIs expect none',
  $id: 'schema ids: not part of any model dialect',
  $anchor: 'anchors: not part of any model dialect',
  oneOf: 'oneOf: OpenAI strict and Gemini refuse it (anyOf of typed branches is accepted)',
  allOf: 'allOf: OpenAI strict and Gemini refuse it',
  not: 'not: OpenAI strict and Gemini refuse it',
  if: 'conditionals: no model dialect has them',
  then: 'conditionals: no model dialect has them',
  else: 'conditionals: no model dialect has them',
  const: "const: not in Gemini's OpenAPI 3.0 subset (use a one-value enum)",
  patternProperties: 'patternProperties: OpenAI strict and Gemini refuse it',
  propertyNames: 'propertyNames: OpenAI strict and Gemini refuse it',
  unevaluatedProperties: 'unevaluatedProperties: OpenAI strict and Gemini refuse it',
  unevaluatedItems: 'unevaluatedItems: OpenAI strict and Gemini refuse it',
  prefixItems: 'tuples: OpenAI strict and Gemini refuse them',
  additionalItems: 'tuples: OpenAI strict and Gemini refuse them',
  contains: 'contains: OpenAI strict and Gemini refuse it',
  dependencies: 'dependencies: no model dialect has them',
  dependentRequired: 'dependentRequired: no model dialect has it',
  dependentSchemas: 'dependentSchemas: no model dialect has it',
  exclusiveMinimum: "a numeric exclusiveMinimum: a boolean in Gemini's OpenAPI 3.0 (write an inclusive minimum)",
  exclusiveMaximum: "a numeric exclusiveMaximum: a boolean in Gemini's OpenAPI 3.0 (write an inclusive maximum)",
  nullable: "OpenAPI's nullable: not JSON Schema (leave the field out instead)",
};

/** The `format` values OpenAI's structured outputs accept (Gemini accepts fewer on strings: none of these is required). */
const FORMATS = new Set(['date-time', 'time', 'date', 'duration', 'email', 'hostname', 'ipv4', 'ipv6', 'uuid']);
const TYPES = new Set(['object', 'array', 'string', 'number', 'integer', 'boolean']);

/** Every non-portable construct in one schema, as `path: reason`. */
function portabilityFindings(schema: unknown, path = '', root = true): string[] {
  const found: string[] = [];
  const at = (where: string, why: string) => found.push(`${where || '/'}: ${why}`);
  if (!isSchema(schema)) {
    at(path, `a schema must be an object, not ${JSON.stringify(schema)} (a bare true/false schema is refused by Claude Code and Gemini)`);
    return found;
  }
  for (const key of Object.keys(schema)) if (key in REFUSED) at(`${path}/${key}`, REFUSED[key]!);
  const { type, anyOf, properties, items, additionalProperties, format, required } = schema;
  if (root && type !== 'object') at(path, `the root must be {"type":"object"} (got ${JSON.stringify(type)}): a root union or scalar is refused`);
  if (Array.isArray(type)) at(`${path}/type`, `a type union ${JSON.stringify(type)}: Gemini reads one type; leave an unknown value out instead of null`);
  else if (type === 'null') at(`${path}/type`, 'a null type: leave the field out instead');
  else if (type === undefined && anyOf === undefined) at(path, 'no type: Gemini and OpenAI strict need one on every schema');
  else if (type !== undefined && !TYPES.has(String(type))) at(`${path}/type`, `an unknown type ${JSON.stringify(type)}`);
  if (anyOf !== undefined) {
    if (root) at(`${path}/anyOf`, 'anyOf at the root: OpenAI refuses it');
    if (!Array.isArray(anyOf)) at(`${path}/anyOf`, 'anyOf must be an array');
    else
      anyOf.forEach((branch, i) => {
        if (!isSchema(branch) || typeof branch.type !== 'string') at(`${path}/anyOf/${i}`, 'an anyOf branch without one type: Gemini refuses it');
        found.push(
          ...portabilityFindings(branch, `${path}/anyOf/${i}`, false).filter((f) => !f.endsWith('no type: Gemini and OpenAI strict need one on every schema')),
        );
      });
  }
  if (format !== undefined && !FORMATS.has(String(format))) at(`${path}/format`, `format ${JSON.stringify(format)}: outside the set every dialect accepts`);
  if (type === 'array') {
    if (items === undefined) at(path, 'an array without items: VS Code and OpenAI refuse it');
    else if (Array.isArray(items)) at(`${path}/items`, 'tuple items: OpenAI strict and Gemini refuse them');
    else found.push(...portabilityFindings(items, `${path}/items`, false));
  }
  if (properties !== undefined) {
    if (!isSchema(properties)) at(`${path}/properties`, 'properties must be an object');
    else for (const [name, s] of Object.entries(properties)) found.push(...portabilityFindings(s, `${path}/properties/${name}`, false));
  }
  if (Array.isArray(required) && isSchema(properties)) {
    for (const name of required) if (!(String(name) in properties)) at(`${path}/required`, `"${String(name)}" is required but not a property`);
  }
  if (isSchema(additionalProperties)) found.push(...portabilityFindings(additionalProperties, `${path}/additionalProperties`, false));
  return found;
}

interface Listed {
  name: string;
  inputSchema: Schema;
  outputSchema?: Schema;
}

describe('published schemas are portable across model APIs', () => {
  let tools: Listed[];
  beforeAll(async () => {
    const peer = await memoryPeer();
    try {
      tools = ((await call(peer, 'tools/list')).result as { tools: Listed[] }).tools;
    } finally {
      await peer.close();
    }
  });

  test('tools/list (every permission) lists every tool', () => {
    expect(tools.map((t) => t.name).sort()).toEqual(ALL_TOOLS.map((t) => t.name).sort());
  });

  test('no input or output schema has a construct some model dialect refuses', () => {
    const findings = tools.flatMap((t) =>
      (['inputSchema', 'outputSchema'] as const).flatMap((kind) => {
        const schema = t[kind];
        return schema === undefined ? [] : portabilityFindings(schema).map((f) => `${t.name} ${kind} ${f}`);
      }),
    );
    expect(findings).toEqual([]);
  });
});

describe('the checker and the rewrite', () => {
  test('the checker finds each kind of construct the Inspector and the dialects flag', () => {
    const bad = {
      type: 'object',
      properties: {
        union: { type: ['number', 'null'] },
        nullable: { anyOf: [{ type: 'string' }, { type: 'null' }] },
        ref: { $ref: '#/definitions/x' },
        tuple: { type: 'array', items: [{ type: 'string' }] },
        map: { type: 'object', patternProperties: { '^a': { type: 'string' } } },
        url: { type: 'string', format: 'uri' },
        any: {},
        positive: { type: 'integer', exclusiveMinimum: 0 },
      },
      definitions: { x: { type: 'string' } },
    };
    const found = portabilityFindings(bad).join('\n');
    for (const path of [
      '/properties/union/type',
      '/properties/nullable/anyOf/1/type',
      '/properties/ref/$ref',
      '/properties/tuple/items',
      '/properties/map/patternProperties',
      '/properties/url/format',
      '/properties/any: no type',
      '/properties/positive/exclusiveMinimum',
      '/definitions',
    ]) {
      expect(found).toContain(path);
    }
    expect(portabilityFindings({ type: 'string' })).toEqual([expect.stringContaining('the root must be')]);
  });

  test('the rewrite keeps what a schema accepts: inclusive integer bounds, no key constraints, no empty schemas', () => {
    expect(
      portableSchema({
        type: 'object',
        properties: {
          n: { type: 'integer', exclusiveMinimum: 0, maximum: Number.MAX_SAFE_INTEGER },
          m: { type: 'integer', minimum: Number.MIN_SAFE_INTEGER, exclusiveMaximum: 10 },
          env: { type: 'object', propertyNames: { pattern: '^[A-Z]+$' }, additionalProperties: { type: 'string' } },
          // A property named like a keyword is a property, not a keyword.
          propertyNames: { type: 'string' },
          open: { type: 'object', properties: {}, additionalProperties: {} },
        },
      }),
    ).toEqual({
      type: 'object',
      properties: {
        n: { type: 'integer', minimum: 1 },
        m: { type: 'integer', maximum: 9 },
        env: { type: 'object', additionalProperties: { type: 'string' } },
        propertyNames: { type: 'string' },
        open: { type: 'object', properties: {} },
      },
    });
  });
});
