// OpenAPI v3 validation of a structural schema with ajv, its errors worded as the API
// server words them: `spec.methods[0]: Unsupported value: "GETT": supported values:
// "GET", "POST"`, `spec.path: Invalid value: "x": spec.path in body should match '^/'`,
// `spec.methods: Too many: 33: must have at most 32 items`, `spec.name: Too long: may
// not be more than 63 bytes`. Only the string formats a CRD may use are checked, with
// Kubernetes' definitions (a `duration` is Go's `1m30s`, not ISO-8601's `PT1M30S`).
import { isIP } from 'node:net';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { toFieldError } from './structural-messages.ts';
import {
  childSchema,
  correlatedField,
  correlatedItem,
  sameJson,
  type OldValue,
  isObject,
  type FieldError,
  type OpenApiSchema,
} from './structural-types.ts';

const addFormats = addFormatsModule as unknown as (ajv: Ajv, formats: string[]) => Ajv;

const GO_DURATION = /^[-+]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$|^[-+]?0$/;
const SHORT_UNITS = new Set([
  'ns',
  'nano',
  'us',
  'µs',
  'micro',
  'ms',
  'milli',
  's',
  'sec',
  'm',
  'min',
]);
const LONG_UNITS = ['h', 'hr', 'hour', 'd', 'day', 'w', 'wk', 'week'];

/** Go's time.ParseDuration, or the "3 days" form Kubernetes' format registry also takes. */
function isDuration(s: string): boolean {
  if (GO_DURATION.test(s)) return true;
  for (const m of s.matchAll(/(\d+)\s*([A-Za-zµ]+)/g)) {
    const unit = (m[2] ?? '').toLowerCase();
    if (SHORT_UNITS.has(unit) || LONG_UNITS.some((u) => unit.startsWith(u))) return true;
  }
  return false;
}

function isDate(s: string): boolean {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(s);
  if (!m) return false;
  const d = new Date(`${s}T00:00:00Z`);
  return !Number.isNaN(d.getTime()) && d.getUTCDate() === Number(m[3]);
}

/** RFC 3339 as Kubernetes reads it: the offset may be left out, `T` may be a space. */
function isDateTime(s: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})?$/.test(s)) {
    return false;
  }
  return isDate(s.slice(0, 10)) && !Number.isNaN(Date.parse(s.replace(' ', 'T')));
}

function isCidr(s: string): boolean {
  const m = /^([^/]+)\/(\d+)$/.exec(s);
  const family = m ? isIP(m[1] ?? '') : 0;
  return family !== 0 && Number(m?.[2]) <= (family === 4 ? 32 : 128);
}

const uuid = (version: string): RegExp =>
  new RegExp(
    `^[0-9a-f]{8}-?[0-9a-f]{4}-?${version}[0-9a-f]{3}-?${version === '[0-9a-f]' ? '[0-9a-f]' : '[89ab]'}[0-9a-f]{3}-?[0-9a-f]{12}$`,
    'i',
  );

/** The formats Kubernetes validates (its names compared without dashes), as ajv formats. */
const FORMATS: Record<string, (s: string) => boolean> = {
  bsonobjectid: (s) => /^[0-9a-fA-F]{24}$/.test(s),
  cidr: isCidr,
  mac: (s) =>
    /^([0-9a-fA-F]{2}[:-]){5}[0-9a-fA-F]{2}$|^([0-9a-fA-F]{2}[:-]){7}[0-9a-fA-F]{2}$|^([0-9a-fA-F]{2}[:-]){19}[0-9a-fA-F]{2}$|^([0-9a-fA-F]{4}\.){2}[0-9a-fA-F]{4}$/.test(
      s,
    ),
  uuid: (s) => uuid('[0-9a-f]').test(s),
  uuid3: (s) => /^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i.test(s),
  uuid4: (s) => uuid('4').test(s),
  uuid5: (s) => uuid('5').test(s),
  hexcolor: (s) => /^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$/.test(s),
  ssn: (s) => /^\d{3}[- ]?\d{2}[- ]?\d{4}$/.test(s),
  byte: (s) => /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(s),
  password: () => true,
  date: isDate,
  datetime: isDateTime,
  duration: isDuration,
  ipv4: (s) => isIP(s) === 4,
  ipv6: (s) => isIP(s) === 6,
  'k8s-short-name': (s) => s.length <= 63 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(s),
  'k8s-long-name': (s) =>
    s.length <= 253 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(s),
};
/** Formats taken from ajv-formats (Kubernetes' definitions agree closely enough). */
const AJV_FORMATS = ['uri', 'email', 'hostname'];

/** The ajv name of a format Kubernetes checks, or undefined (the API server ignores it). */
function formatName(format: string): string | undefined {
  const name = format.startsWith('k8s-') ? format : format.replace(/-/g, '');
  return name in FORMATS || AJV_FORMATS.includes(name) ? name : undefined;
}

const POSIX: Record<string, string> = {
  alnum: 'A-Za-z0-9',
  alpha: 'A-Za-z',
  ascii: '\\x00-\\x7F',
  blank: '\\t ',
  digit: '0-9',
  lower: 'a-z',
  space: '\\t\\n\\v\\f\\r ',
  upper: 'A-Z',
  word: 'A-Za-z0-9_',
  xdigit: '0-9A-Fa-f',
};

/**
 * A schema `pattern` is RE2 (Go): leading `(?i)`/`(?s)` flags, POSIX classes, `\A` and
 * `\z` are translated for JavaScript. A pattern that still does not compile matches
 * nothing (the API server reports such a value as not matching, too).
 */
function re2(pattern: string, unicode: string): { test: (s: string) => boolean } {
  let source = pattern;
  let flags = unicode;
  const lead = /^\(\?([is]+)\)/.exec(source);
  if (lead) {
    flags += lead[1] ?? '';
    source = source.slice(lead[0].length);
  }
  source = source
    .replace(/\[:([a-z]+):\]/g, (m, name: string) => POSIX[name] ?? m)
    .replace(/\\A/g, '^')
    .replace(/\\z/g, '$');
  try {
    return new RegExp(source, flags);
  } catch {
    return { test: () => false };
  }
}
re2.code = 're2';

const ajv = new Ajv({
  allErrors: true,
  strict: false,
  verbose: true,
  useDefaults: false,
  code: { regExp: re2 },
});
addFormats(ajv, AJV_FORMATS);
for (const [name, check] of Object.entries(FORMATS)) ajv.addFormat(name, check);
const compiled = new WeakMap<OpenApiSchema, ValidateFunction>();

/** Schema errors of `value`, at paths below `basePath`. */
export function schemaErrors(
  value: unknown,
  schema: OpenApiSchema,
  basePath: string,
  old?: OldValue,
): FieldError[] {
  let fn = compiled.get(schema);
  if (!fn) {
    fn = ajv.compile(toAjvSchema(schema) as object);
    compiled.set(schema, fn);
  }
  if (fn(value)) return [];
  const errors = fn.errors ?? [];
  const memo = new Map<string, Step>();
  // Per value the API server reports maxLength, else minLength, else pattern.
  const shadowed = (e: ErrorObject): boolean => {
    const order = ['maxLength', 'minLength', 'pattern'];
    const rank = order.indexOf(e.keyword);
    return (
      rank > 0 &&
      errors.some(
        (o) =>
          o.instancePath === e.instancePath &&
          order.indexOf(o.keyword) >= 0 &&
          order.indexOf(o.keyword) < rank,
      )
    );
  };
  return errors
    .filter(
      (e) =>
        !shadowed(e) && e.keyword !== 'if' && !ratcheted(e.instancePath, value, schema, old, memo),
    )
    .map((e) => toFieldError(e, basePath));
}

/** Blocking causes: after one of them, the API server does not run CEL rules. */
export const BLOCKING_REASONS = new Set([
  'FieldValueNotSupported',
  'FieldValueRequired',
  'FieldValueTooLong',
  'FieldValueTooMany',
  'FieldValueTypeInvalid',
]);

/** The schema as ajv reads it: vendor keys, defaults and unchecked formats removed. */
function toAjvSchema(schema: unknown): unknown {
  if (!isObject(schema)) return schema;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(schema)) {
    if (k.startsWith('x-kubernetes-') || k === 'default' || k === 'nullable') continue;
    if (k === 'exclusiveMinimum' || k === 'exclusiveMaximum') continue;
    if (k === 'format') Object.assign(out, ajvFormat(v, schema.type));
    else out[k] = SUBSCHEMA_KEYS.has(k) ? subschemas(k, v) : v;
  }
  // OpenAPI v3.0's boolean exclusive bounds are JSON Schema's numeric ones.
  for (const [flag, bound] of [
    ['exclusiveMinimum', 'minimum'],
    ['exclusiveMaximum', 'maximum'],
  ] as const) {
    if (schema[flag] === true && typeof schema[bound] === 'number') {
      delete out[bound];
      out[flag] = schema[bound];
    }
  }
  if (schema['x-kubernetes-int-or-string'] === true && out.type === undefined) {
    out.type = ['integer', 'string'];
  }
  if (schema.nullable === true && out.type !== undefined) {
    out.type = [...(Array.isArray(out.type) ? (out.type as unknown[]) : [out.type]), 'null'];
  }
  return out;
}

const SUBSCHEMA_KEYS = new Set([
  'properties',
  'items',
  'additionalProperties',
  'not',
  'allOf',
  'anyOf',
  'oneOf',
]);

function subschemas(key: string, v: unknown): unknown {
  if (key === 'properties' && isObject(v)) {
    return Object.fromEntries(Object.entries(v).map(([name, sub]) => [name, toAjvSchema(sub)]));
  }
  return Array.isArray(v) ? v.map(toAjvSchema) : toAjvSchema(v);
}

/** `format` as ajv checks it (with the CRD's spelling kept for messages), or nothing. */
function ajvFormat(format: unknown, type: unknown): Record<string, unknown> {
  if (typeof format !== 'string' || (type !== undefined && type !== 'string')) return {};
  const name = formatName(format);
  return name ? { format: name, 'x-format': format } : {};
}

/**
 * Ratcheting (UPDATE): an error is not reported when its value, or a value above it,
 * equals its correlated old value (same key, same `map` list keys, equal `set` item).
 * `memo` holds each visited pointer's node, so that many errors cost one walk.
 */
interface Step {
  x: unknown;
  s: OpenApiSchema | undefined;
  o: OldValue;
  /** The value or one above it equals its old value. */
  unchanged: boolean;
}

function ratcheted(
  pointer: string,
  value: unknown,
  schema: OpenApiSchema,
  old: OldValue,
  memo: Map<string, Step>,
): boolean {
  if (!old) return false;
  const parts = pointer.split('/').slice(1);
  let prefix = '';
  let step = memo.get('');
  if (!step) {
    step = { x: value, s: schema, o: old, unchanged: sameJson(value, old.value) };
    memo.set('', step);
  }
  for (const raw of parts) {
    if (step.unchanged || !step.o) return step.unchanged;
    prefix = `${prefix}/${raw}`;
    const known = memo.get(prefix);
    if (known) {
      step = known;
      continue;
    }
    step = next(step, raw.replace(/~1/g, '/').replace(/~0/g, '~'));
    memo.set(prefix, step);
  }
  return step.unchanged;
}

function next(parent: Step, key: string): Step {
  const { x, s, o } = parent;
  let child: Step;
  if (Array.isArray(x)) {
    const item: unknown = x[Number(key)];
    child = {
      x: item,
      s: s?.items,
      o: s ? correlatedItem(item, s, o) : undefined,
      unchanged: false,
    };
  } else if (isObject(x)) {
    child = { x: x[key], s: childSchema(s, key), o: correlatedField(key, o), unchanged: false };
  } else return { x: undefined, s: undefined, o: undefined, unchanged: false };
  child.unchanged = child.o !== undefined && sameJson(child.x, child.o.value);
  return child;
}
