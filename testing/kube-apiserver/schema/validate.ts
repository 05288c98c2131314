// OpenAPI v3 value validation of a CRD schema, worded as the API server words it: the
// validator names a field `spec.methods[0]` and says `spec.path in body should match
// '^/.*$'`; that text becomes the detail of a field error (`Invalid value: "x": ...`),
// except for the keywords with their own cause type (required → Required value, enum →
// Unsupported value, maxLength → Too long, maxItems/maxProperties → Too many, type and
// format → Invalid value with the type).
//
// Ratcheting (on UPDATE): a value equal to its correlated old value (same object key,
// same list-map key, equal set element) keeps whatever errors it had, as the API
// server does since CRD validation ratcheting went GA.
import { fe, goFloat, goJson } from './errors.ts';
import { compilePattern, formatChecker } from './formats.ts';
import {
  canonicalJson,
  deepEqual,
  isObject,
  property,
  type FieldError,
  type OpenApiSchema,
} from './types.ts';

type Old = { value: unknown } | undefined;

/** Validate a whole object; `old` (an UPDATE's stored object) enables ratcheting. */
export function validateSchema(value: unknown, schema: OpenApiSchema, old?: Old): FieldError[] {
  const out: FieldError[] = [];
  node(value, schema, '', old, out);
  return out;
}

/** The validator's path as a field: without the leading dot, `<nil>` when empty. */
const fieldOf = (name: string): string => name.replace(/^\./, '') || '<nil>';
const inBody = (name: string, text: string): string => `${name} in body ${text}`;
/** Errors of allOf/anyOf/oneOf/not carry no field (the API server prints `<nil>`). */
const composite = (text: string): FieldError => fe.invalid('<nil>', '', text);

function jsonType(x: unknown): string {
  if (x === null) return 'null';
  if (Array.isArray(x)) return 'array';
  if (typeof x === 'number') return Number.isInteger(x) ? 'integer' : 'number';
  return typeof x;
}

function node(x: unknown, s: OpenApiSchema, name: string, old: Old, out: FieldError[]): void {
  if (old && deepEqual(x, old.value)) return;
  checkType(x, s, name, out);
  if (x === null || x === undefined) {
    checkEnum(x, s, name, out);
    return;
  }
  checkCombinators(x, s, name, out);
  if (typeof x === 'string') checkString(x, s, name, out);
  if (typeof x === 'number') checkNumber(x, s, name, out);
  if (Array.isArray(x)) checkArray(x, s, name, old, out);
  checkEnum(x, s, name, out);
  if (isObject(x)) checkObject(x, s, name, old, out);
}

function checkType(x: unknown, s: OpenApiSchema, name: string, out: FieldError[]): void {
  const types = s['x-kubernetes-int-or-string'] ? ['integer', 'string'] : s.type ? [s.type] : [];
  if (types.length === 0) return;
  const t = jsonType(x ?? null);
  if (t === 'null' && s.nullable) return;
  if (types.includes(t) || (t === 'integer' && types.includes('number'))) return;
  out.push(
    fe.typeInvalid(fieldOf(name), t, inBody(name, `must be of type ${types.join(',')}: "${t}"`)),
  );
}

function checkCombinators(x: unknown, s: OpenApiSchema, name: string, out: FieldError[]): void {
  const run = (sub: OpenApiSchema): FieldError[] => {
    const errs: FieldError[] = [];
    node(x, sub, name, undefined, errs);
    return errs;
  };
  const q = JSON.stringify(name);
  const fewest = (results: FieldError[][]): FieldError[] =>
    results.reduce((a, b) => (b.length < a.length ? b : a));
  if (s.anyOf?.length) {
    const results = s.anyOf.map(run);
    if (!results.some((r) => r.length === 0)) {
      out.push(composite(`${q} must validate at least one schema (anyOf)`), ...fewest(results));
    }
  }
  if (s.oneOf?.length) {
    const results = s.oneOf.map(run);
    const valid = results.filter((r) => r.length === 0).length;
    if (valid !== 1) {
      const found = valid === 0 ? 'Found none valid' : `Found ${valid} valid alternatives`;
      out.push(composite(`${q} must validate one and only one schema (oneOf). ${found}`));
      if (valid === 0) out.push(...fewest(results));
    }
  }
  if (s.allOf?.length) {
    const results = s.allOf.map(run);
    const valid = results.filter((r) => r.length === 0).length;
    out.push(...results.flat());
    if (valid !== results.length) {
      out.push(
        composite(
          `${q} must validate all the schemas (allOf)${valid === 0 ? '. None validated' : ''}`,
        ),
      );
    }
  }
  if (s.not && run(s.not).length === 0)
    out.push(composite(`${q} must not validate the schema (not)`));
}

function checkString(x: string, s: OpenApiSchema, name: string, out: FieldError[]): void {
  const field = fieldOf(name);
  const runes = [...x].length;
  if (s.maxLength !== undefined && runes > s.maxLength) {
    out.push(fe.tooLong(field, s.maxLength));
  } else if (s.minLength !== undefined && runes < s.minLength) {
    out.push(fe.invalid(field, x, inBody(name, `should be at least ${s.minLength} chars long`)));
  } else if (s.pattern !== undefined) {
    const re = compilePattern(s.pattern);
    if (re instanceof Error) {
      out.push(
        fe.invalid(
          field,
          x,
          inBody(name, `should match '${s.pattern}, but pattern is invalid: ${re.message}'`),
        ),
      );
    } else if (!re.test(x)) {
      out.push(fe.invalid(field, x, inBody(name, `should match '${s.pattern}'`)));
    }
  }
  const format = s.type === undefined || s.type === 'string' ? formatChecker(s.format) : undefined;
  if (format && !format(x)) {
    out.push(
      fe.typeInvalid(field, x, inBody(name, `must be of type ${s.format}: ${JSON.stringify(x)}`)),
    );
  }
}

function checkNumber(x: number, s: OpenApiSchema, name: string, out: FieldError[]): void {
  const field = fieldOf(name);
  if (s.type === 'integer' && s.format === 'int32' && (x < -(2 ** 31) || x >= 2 ** 31)) {
    out.push(composite(`Checked value must be of type integer with format int32 in ${name}`));
  }
  // Whole numbers are compared as int64 against truncated bounds, others as float64.
  const whole = Number.isInteger(x);
  const bound = (b: number): [number, string] =>
    whole ? [Math.trunc(b), String(Math.trunc(b))] : [b, goFloat(b)];
  if (s.multipleOf !== undefined) {
    const [factor, shown] = bound(s.multipleOf);
    if (factor <= 0) {
      out.push(composite(`factor MultipleOf declared for ${name} must be positive: ${shown}`));
    } else if (!Number.isInteger(factor < 1 ? (1 / factor) * x : x / factor)) {
      out.push(fe.invalid(field, x, inBody(name, `should be a multiple of ${shown}`)));
    }
  }
  if (s.minimum !== undefined) {
    const [min, shown] = bound(s.minimum);
    if (s.exclusiveMinimum ? x <= min : x < min) {
      const op = s.exclusiveMinimum ? 'greater than' : 'greater than or equal to';
      out.push(fe.invalid(field, x, inBody(name, `should be ${op} ${shown}`)));
    }
  }
  if (s.maximum !== undefined) {
    const [max, shown] = bound(s.maximum);
    if (s.exclusiveMaximum ? x >= max : x > max) {
      const op = s.exclusiveMaximum ? 'less than' : 'less than or equal to';
      out.push(fe.invalid(field, x, inBody(name, `should be ${op} ${shown}`)));
    }
  }
}

/** The old item an item correlates with: by keys in a map list, by value in a set. */
function oldItem(item: unknown, s: OpenApiSchema, old: Old): Old {
  if (!old || !Array.isArray(old.value)) return undefined;
  const olds: unknown[] = old.value;
  const type = s['x-kubernetes-list-type'];
  if (type === 'set') return olds.some((o) => deepEqual(o, item)) ? { value: item } : undefined;
  if (type !== 'map' || !isObject(item)) return undefined;
  const keys = s['x-kubernetes-list-map-keys'] ?? [];
  const match = olds.find((o) => isObject(o) && keys.every((k) => deepEqual(o[k], item[k])));
  return match === undefined ? undefined : { value: match };
}

function checkArray(
  x: unknown[],
  s: OpenApiSchema,
  name: string,
  old: Old,
  out: FieldError[],
): void {
  const field = fieldOf(name);
  if (s.items) {
    const items = s.items;
    x.forEach((item, i) => node(item, items, `${name}[${i}]`, oldItem(item, s, old), out));
  }
  if (s.minItems !== undefined && x.length < s.minItems) {
    out.push(fe.invalid(field, x.length, inBody(name, `should have at least ${s.minItems} items`)));
  }
  if (s.maxItems !== undefined && x.length > s.maxItems) {
    out.push(fe.tooMany(field, x.length, s.maxItems));
  }
  if (s.uniqueItems && new Set(x.map(canonicalJson)).size !== x.length) {
    out.push(fe.invalid(field, '', inBody(name, `shouldn't contain duplicates`)));
  }
}

function checkEnum(x: unknown, s: OpenApiSchema, name: string, out: FieldError[]): void {
  if (!s.enum?.length || (x !== undefined && s.enum.some((v) => deepEqual(v, x)))) return;
  const supported = s.enum.map((v) => (typeof v === 'string' ? v : goJson(v)));
  out.push(fe.notSupported(fieldOf(name), x ?? null, supported));
}

function checkObject(
  x: Record<string, unknown>,
  s: OpenApiSchema,
  name: string,
  old: Old,
  out: FieldError[],
): void {
  const field = fieldOf(name);
  const count = Object.keys(x).length;
  if (s.minProperties !== undefined && count < s.minProperties) {
    out.push(
      fe.invalid(field, count, inBody(name, `should have at least ${s.minProperties} properties`)),
    );
  }
  if (s.maxProperties !== undefined && count > s.maxProperties) {
    out.push(fe.tooMany(field, count, s.maxProperties));
  }
  const oldObj = old && isObject(old.value) ? old.value : undefined;
  const oldChild = (k: string): Old =>
    oldObj && Object.hasOwn(oldObj, k) ? { value: oldObj[k] } : undefined;
  for (const [k, v] of Object.entries(x)) {
    const prop = property(s, k);
    if (prop) {
      node(v, prop, name ? `${name}.${k}` : k, oldChild(k), out);
    } else if (s.additionalProperties === false) {
      out.push(
        fe.invalid(field, k, inBody(`${name}.${k}`, 'is a forbidden property').replace(/^\./, '')),
      );
    } else if (isObject(s.additionalProperties)) {
      node(v, s.additionalProperties, `${name}.${k}`, oldChild(k), out);
    }
  }
  for (const k of s.required ?? []) {
    if (!Object.hasOwn(x, k)) out.push(fe.required(fieldOf(`${name}.${k}`)));
  }
}
