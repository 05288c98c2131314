// Input and output schemas of an endpoint (spec.schema) as ajv validators.
//
// manual mode: a JSON Schema built from the field list — every field is a top-level
//   property of the body with its JSON type; `required` fields must be present; a field's
//   `value` is an example for testing and is not enforced; other properties are allowed.
// automatic mode: both input and output must be provided. Each comes from its
//   `jsonSchema` text when given, else is inferred from its `example` text:
//     - every property present in the example is required (the example is the contract),
//       except properties whose example value is null (type unknown → optional, any type);
//     - numbers infer `number` (never `integer`), strings `string` (no formats);
//     - arrays take the item schema when every element infers the same schema, otherwise
//       items are not constrained; nested objects follow the same rules.
//   Invalid JSON text (schema or example) is a configuration error with the spec's message.
//   Learning (spec.schema.learning.enabled, automatic mode only): both input and output
//   must still be present (the objects may be empty: `input: {}`), and a side with no
//   jsonSchema, example or fields has no validator yet; its requests (or responses) are
//   recorded as samples, from which the read API proposes a schema (docs/schemas.md).
//
// Violations are reported all at once (allErrors) as JSON Pointers into the body; a
// missing required field points at the field itself (`/customer/email`), not its parent.
import { Ajv, type ErrorObject } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { SchemaField, SchemaSpec } from './v1alpha1/index.ts';

// ajv-formats is CommonJS; under nodenext its default import is typed as the module.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

export const MSG_AUTOMATIC_IO_BOTH =
  'Please provide both input and output schemas for automatic IO mode.';
export const MSG_INVALID_JSON = 'Make sure your schemas and examples are valid JSON format.';

/** One violation: a JSON Pointer into the validated document and what is wrong there. */
export interface FieldProblem {
  pointer: string;
  detail: string;
}

/** A JSON Schema document (an object or a boolean schema). */
export type JsonSchema = Record<string, unknown> | boolean;

/** Validates a value; returns every violation (empty when valid). */
export interface ValidateFn {
  (data: unknown): FieldProblem[];
  readonly schema: JsonSchema;
}

export interface CompiledSchemas {
  input?: ValidateFn;
  output?: ValidateFn;
}

type IoSchema = NonNullable<SchemaSpec['input']>;

/** Escapes one JSON Pointer reference token (RFC 6901). */
export function escapePointerToken(token: string): string {
  return token.replace(/~/g, '~0').replace(/\//g, '~1');
}

function toProblems(errors: readonly ErrorObject[]): FieldProblem[] {
  return errors.map((error) => {
    if (error.keyword === 'required') {
      const missing = String((error.params as { missingProperty: string }).missingProperty);
      return {
        pointer: `${error.instancePath}/${escapePointerToken(missing)}`,
        detail: 'is required',
      };
    }
    return { pointer: error.instancePath, detail: error.message ?? 'is invalid' };
  });
}

/** A JSON Schema for a manual field list; undefined when there are no fields. */
export function schemaFromFields(
  fields: readonly SchemaField[] | undefined,
): JsonSchema | undefined {
  if (!fields || fields.length === 0) return undefined;
  const properties: Record<string, unknown> = {};
  for (const field of fields) properties[field.name] = { type: field.type };
  const required = fields.filter((f) => f.required).map((f) => f.name);
  return { type: 'object', properties, ...(required.length > 0 ? { required } : {}) };
}

/** A JSON Schema inferred from an example value (rules at the top of this file). */
export function inferSchema(example: unknown): Record<string, unknown> {
  if (example === null) return {};
  if (Array.isArray(example)) {
    if (example.length === 0) return { type: 'array' };
    const items = example.map((item) => inferSchema(item));
    const first = JSON.stringify(items[0]);
    return items.every((item) => JSON.stringify(item) === first)
      ? { type: 'array', items: items[0] }
      : { type: 'array' };
  }
  switch (typeof example) {
    case 'string':
      return { type: 'string' };
    case 'number':
      return { type: 'number' };
    case 'boolean':
      return { type: 'boolean' };
    case 'object': {
      const properties: Record<string, unknown> = {};
      const required: string[] = [];
      for (const [key, value] of Object.entries(example as Record<string, unknown>)) {
        properties[key] = inferSchema(value);
        if (value !== null) required.push(key);
      }
      return { type: 'object', properties, ...(required.length > 0 ? { required } : {}) };
    }
    default:
      return {};
  }
}

class SchemaConfigError extends Error {}

function parseJsonText(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new SchemaConfigError(MSG_INVALID_JSON);
  }
}

function hasText(value: string | undefined): value is string {
  return value !== undefined && value.trim() !== '';
}

function isProvided(io: IoSchema | undefined): io is IoSchema {
  return !!io && (hasText(io.jsonSchema) || hasText(io.example) || (io.fields?.length ?? 0) > 0);
}

/** The schema of one side in automatic mode: jsonSchema text, else the example, else fields. */
function automaticSchema(io: IoSchema): JsonSchema | undefined {
  // Both texts must be valid JSON when both are given, even though jsonSchema wins.
  const schema = hasText(io.jsonSchema) ? parseJsonText(io.jsonSchema) : undefined;
  const example = hasText(io.example) ? parseJsonText(io.example) : undefined;
  if (schema !== undefined) {
    if (
      typeof schema !== 'boolean' &&
      (typeof schema !== 'object' || schema === null || Array.isArray(schema))
    ) {
      throw new SchemaConfigError('A JSON Schema must be a JSON object.');
    }
    return schema as JsonSchema;
  }
  if (example !== undefined) return inferSchema(example);
  return schemaFromFields(io.fields);
}

function compileOne(
  ajv: Ajv,
  schema: JsonSchema | undefined,
  side: string,
): ValidateFn | undefined {
  if (schema === undefined) return undefined;
  let validate: ReturnType<Ajv['compile']>;
  try {
    validate = ajv.compile(schema);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new SchemaConfigError(`The ${side} JSON Schema is not valid: ${reason}`);
  }
  const fn = (data: unknown): FieldProblem[] =>
    validate(data) ? [] : toProblems(validate.errors ?? []);
  return Object.assign(fn, { schema });
}

/**
 * Builds the validators of spec.schema. Returns `{ error }` with the message for the
 * Valid=False condition when the configuration is unusable (the automatic IO messages are
 * the spec's, verbatim). A side without fields / jsonSchema / example has no validator.
 */
export function compileSchemas(
  schema: SchemaSpec | undefined,
): CompiledSchemas | { error: string } {
  if (!schema) return {};
  // One ajv per call: ajv caches every compiled schema, and routes are rebuilt on change.
  const ajv = new Ajv({ allErrors: true, strict: false });
  addFormats(ajv);
  try {
    if (schema.mode === 'automatic') {
      const learning = isLearning(schema);
      const usable = (io: IoSchema | undefined) => isProvided(io) || (learning && !!io);
      if (!usable(schema.input) || !usable(schema.output)) {
        return { error: MSG_AUTOMATIC_IO_BOTH };
      }
      const inputSchema = schema.input ? automaticSchema(schema.input) : undefined;
      const outputSchema = schema.output ? automaticSchema(schema.output) : undefined;
      return dropUndefined({
        input: compileOne(ajv, inputSchema, 'input'),
        output: compileOne(ajv, outputSchema, 'output'),
      });
    }
    return dropUndefined({
      input: compileOne(ajv, schemaFromFields(schema.input?.fields), 'input'),
      output: compileOne(ajv, schemaFromFields(schema.output?.fields), 'output'),
    });
  } catch (error) {
    if (error instanceof SchemaConfigError) return { error: error.message };
    throw error;
  }
}

/** Whether spec.schema records samples to learn from (automatic IO mode only). */
export function isLearning(schema: SchemaSpec | undefined): boolean {
  return schema?.mode === 'automatic' && schema.learning?.enabled === true;
}

function dropUndefined(schemas: CompiledSchemas): CompiledSchemas {
  const result: CompiledSchemas = {};
  if (schemas.input) result.input = schemas.input;
  if (schemas.output) result.output = schemas.output;
  return result;
}
