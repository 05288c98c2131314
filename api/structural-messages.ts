// ajv's errors as the API server words its field errors (apimachinery's field.Error):
// a label, usually the bad value (a quoted string, a plain number, else JSON), then a
// detail, which for most keywords names the field "in body" as kube-openapi does.
import type { ErrorObject } from 'ajv';
import { canonicalJson, isObject, type FieldError } from './structural-types.ts';

/** A number as Go's `%v` prints a float64. */
export function goFloat(n: number): string {
  if (n === 0 || !Number.isFinite(n)) return String(n);
  const [mantissa = '', e = '0'] = n.toExponential().split('e');
  const exp = Number(e);
  if (exp >= -4 && exp < 6) return String(n);
  return `${mantissa}e${exp < 0 ? '-' : '+'}${String(Math.abs(exp)).padStart(2, '0')}`;
}

/** A bad value as apimachinery prints it: a quoted string, a plain number, else JSON. */
export function shownValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number') return Number.isInteger(value) ? String(value) : goFloat(value);
  if (typeof value === 'boolean') return String(value);
  return canonicalJson(value ?? null)
    .replace(/</g, '\\u003c')
    .replace(/>/g, '\\u003e')
    .replace(/&/g, '\\u0026');
}

function jsonType(x: unknown): string {
  if (x === null || x === undefined) return 'null';
  if (Array.isArray(x)) return 'array';
  if (typeof x === 'number') return Number.isInteger(x) ? 'integer' : 'number';
  return typeof x;
}

const size = (x: unknown): number =>
  Array.isArray(x) ? x.length : isObject(x) ? Object.keys(x).length : 0;
const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? '' : 's'}`;

interface Ctx {
  /** The field's path (empty at the root). */
  name: string;
  field: string;
  data: unknown;
  params: Record<string, unknown>;
  parentSchema: unknown;
  /** The keyword's limit, printed as the API server compares it. */
  bound: string;
  limit: number;
}

const cause = (c: Ctx, reason: string, message: string): FieldError => ({
  field: c.field,
  message,
  reason,
});
const invalid = (c: Ctx, detail: string, value: unknown = c.data): FieldError =>
  cause(c, 'FieldValueInvalid', `Invalid value: ${shownValue(value)}: ${c.name} in body ${detail}`);

const KEYWORDS: Record<string, (c: Ctx) => FieldError> = {
  required: (c) => {
    const missing = String(c.params.missingProperty);
    return {
      field: c.name ? `${c.name}.${missing}` : missing,
      message: 'Required value',
      reason: 'FieldValueRequired',
    };
  },
  enum: (c) => {
    const allowed = c.params.allowedValues as unknown[];
    const supported = allowed.map((v) =>
      JSON.stringify(typeof v === 'string' ? v : canonicalJson(v)),
    );
    return cause(
      c,
      'FieldValueNotSupported',
      `Unsupported value: ${shownValue(c.data)}: supported values: ${supported.join(', ')}`,
    );
  },
  type: (c) => {
    const declared = c.params.type as string | string[];
    const types = (Array.isArray(declared) ? declared : declared.split(',')).filter(
      (t) => t !== 'null',
    );
    const actual = jsonType(c.data);
    return cause(
      c,
      'FieldValueTypeInvalid',
      `Invalid value: "${actual}": ${c.name} in body must be of type ${types.join(',')}: "${actual}"`,
    );
  },
  format: (c) => {
    const declared = (c.parentSchema as { 'x-format'?: unknown } | undefined)?.['x-format'];
    const format = typeof declared === 'string' ? declared : String(c.params.format);
    return cause(
      c,
      'FieldValueTypeInvalid',
      `Invalid value: ${shownValue(c.data)}: ${c.name} in body must be of type ${format}: ${JSON.stringify(c.data)}`,
    );
  },
  maxLength: (c) =>
    cause(c, 'FieldValueTooLong', `Too long: may not be more than ${plural(c.limit, 'byte')}`),
  maxItems: (c) =>
    cause(
      c,
      'FieldValueTooMany',
      `Too many: ${size(c.data)}: must have at most ${plural(c.limit, 'item')}`,
    ),
  maxProperties: (c) =>
    cause(
      c,
      'FieldValueTooMany',
      `Too many: ${size(c.data)}: must have at most ${plural(c.limit, 'item')}`,
    ),
  minLength: (c) => invalid(c, `should be at least ${c.limit} chars long`),
  pattern: (c) => invalid(c, `should match '${String(c.params.pattern)}'`),
  minItems: (c) => invalid(c, `should have at least ${c.limit} items`, size(c.data)),
  minProperties: (c) => invalid(c, `should have at least ${c.limit} properties`, size(c.data)),
  minimum: (c) => invalid(c, `should be greater than or equal to ${c.bound}`),
  exclusiveMinimum: (c) => invalid(c, `should be greater than ${c.bound}`),
  maximum: (c) => invalid(c, `should be less than or equal to ${c.bound}`),
  exclusiveMaximum: (c) => invalid(c, `should be less than ${c.bound}`),
  multipleOf: (c) => invalid(c, `should be a multiple of ${String(c.params.multipleOf)}`),
  uniqueItems: (c) => invalid(c, "shouldn't contain duplicates", ''),
};

/** One ajv error (with `verbose` data) as a field error below `basePath`. */
export function toFieldError(e: ErrorObject, basePath: string): FieldError {
  const name = joinPath(basePath, e.instancePath);
  const params = e.params as Record<string, unknown>;
  const limit = typeof params.limit === 'number' ? params.limit : 0;
  const ctx: Ctx = {
    name,
    field: name || '<nil>',
    data: e.data,
    params,
    parentSchema: e.parentSchema,
    limit,
    // Whole numbers are compared as int64 against truncated bounds, others as float64.
    bound: Number.isInteger(e.data) ? String(Math.trunc(limit)) : goFloat(limit),
  };
  const make = KEYWORDS[e.keyword];
  return make ? make(ctx) : invalid(ctx, e.message ?? 'is invalid');
}

/** A JSON pointer below `base` as a Kubernetes field path (`spec.methods[0]`). */
export function joinPath(base: string, pointer: string): string {
  let out = base;
  for (const raw of pointer.split('/').slice(1)) {
    const part = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    out = /^\d+$/.test(part) ? `${out}[${part}]` : out ? `${out}.${part}` : part;
  }
  return out;
}
