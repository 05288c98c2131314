// Multi-sample schema inference: many JSON documents (sample request bodies, or
// workflow responses) merged into one JSON Schema. Pure: no I/O, no clock.
//
// The rules (docs/schemas.md repeats them for users):
// - Keywords only where JSON Schema 2020-12 and draft-07 agree (type, properties,
//   required, items as one schema, format), and no `$schema`: the proposal compiles as
//   2020-12 (the OpenAPI documents) and pastes into `jsonSchema`, which the gateway
//   compiles with ajv's default dialect.
// - Objects: `properties` is the union of the keys seen; `required` lists the keys
//   present in EVERY object seen at that place (a key whose value was null counts as
//   present). Objects stay open (no additionalProperties), like the manual mode's.
// - Arrays: one `items` schema, merged from every element of every array seen there;
//   arrays that were always empty give `{ type: 'array' }` (items unconstrained).
// - Numbers: `integer` only when every number seen there is an integer; integers mixed
//   with fractions give `number`.
// - Conflicting types give a type list in a fixed order, e.g. `type: ['string',
//   'integer']`, with the keywords of each type side by side (`properties` only applies
//   to objects, `items` to arrays): one schema, no anyOf.
// - null: a place where null was seen adds 'null' to its types (always null: 'null').
// - Strings: `format: 'date-time'` only when every string seen there is an RFC 3339
//   date-time; no other formats, no lengths, patterns or enums (samples are too few to
//   tell a closed set from chance).
// - Bounds: below MAX_DEPTH levels nothing more is described (`{}`, any value), and an
//   object describes at most MAX_PROPERTIES keys (the first seen; later keys are allowed
//   by the open object). Samples are never kept in the result, only their shapes.
import { setOwn } from '../own-property.ts';
import type { JsonSchema } from '../../api/schemas.ts';

export const MAX_DEPTH = 16;
export const MAX_PROPERTIES = 256;

type JsonType = 'null' | 'boolean' | 'integer' | 'number' | 'string' | 'object' | 'array';
/** The order of a type list: the first types are the commonest in webhook bodies. */
const TYPE_ORDER: JsonType[] = [
  'object',
  'array',
  'string',
  'integer',
  'number',
  'boolean',
  'null',
];

/** What was seen at one place of the documents. */
interface Shape {
  types: Set<JsonType>;
  /** Strings seen, and whether each was an RFC 3339 date-time. */
  strings: number;
  dateTimes: number;
  /** Objects seen here, and per key: its shape (its own `seen` counts its presence). */
  objects: number;
  properties: Map<string, Shape & { present: number }>;
  /** Array elements seen here, merged (undefined: only empty arrays so far). */
  items: Shape | undefined;
  /** Deeper than MAX_DEPTH: nothing is described. */
  truncated: boolean;
}

const DATE_TIME = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

function emptyShape(): Shape {
  return {
    types: new Set(),
    strings: 0,
    dateTimes: 0,
    objects: 0,
    properties: new Map(),
    items: undefined,
    truncated: false,
  };
}

function typeOf(value: unknown): JsonType | undefined {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  switch (typeof value) {
    case 'boolean':
      return 'boolean';
    case 'number':
      return Number.isInteger(value) ? 'integer' : 'number';
    case 'string':
      return 'string';
    case 'object':
      return 'object';
    default:
      return undefined; // not JSON (undefined, functions): ignored
  }
}

/** Adds one value to the shape of its place. */
function observe(shape: Shape, value: unknown, depth: number): void {
  if (depth >= MAX_DEPTH) {
    shape.truncated = true;
    return;
  }
  const type = typeOf(value);
  if (type === undefined) return;
  shape.types.add(type);
  if (type === 'string') {
    shape.strings++;
    if (DATE_TIME.test(value as string)) shape.dateTimes++;
  } else if (type === 'array') {
    for (const element of value as unknown[]) {
      shape.items ??= emptyShape();
      observe(shape.items, element, depth + 1);
    }
  } else if (type === 'object') {
    shape.objects++;
    for (const [key, child] of Object.entries(value as Record<string, unknown>)) {
      let property = shape.properties.get(key);
      if (!property) {
        if (shape.properties.size >= MAX_PROPERTIES) continue;
        property = { ...emptyShape(), present: 0 };
        shape.properties.set(key, property);
      }
      property.present++;
      observe(property, child, depth + 1);
    }
  }
}

/** The JSON Schema of a shape. */
function schemaOf(shape: Shape): Record<string, unknown> {
  if (shape.truncated || shape.types.size === 0) return {};
  const types = new Set(shape.types);
  if (types.has('number')) types.delete('integer');
  const list = TYPE_ORDER.filter((t) => types.has(t));
  const schema: Record<string, unknown> = { type: list.length === 1 ? list[0] : list };
  if (types.has('object')) {
    const properties: Record<string, unknown> = {};
    const required: string[] = [];
    for (const [key, property] of shape.properties) {
      setOwn(properties, key, schemaOf(property));
      if (property.present === shape.objects) required.push(key);
    }
    schema.properties = properties;
    if (required.length > 0) schema.required = required;
  }
  if (types.has('array') && shape.items) schema.items = schemaOf(shape.items);
  if (types.has('string') && shape.strings > 0 && shape.dateTimes === shape.strings) {
    schema.format = 'date-time';
  }
  return schema;
}

/**
 * One JSON Schema that every sample validates against (rules at the top of this file);
 * null when there are no samples.
 */
export function inferFromSamples(samples: readonly unknown[]): JsonSchema | null {
  if (samples.length === 0) return null;
  const root = emptyShape();
  for (const sample of samples) observe(root, sample, 0);
  return schemaOf(root);
}
