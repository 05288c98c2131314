// JSON as CEL sees it in `x-kubernetes-validations` rules: typed by the schema, not by
// the JSON. An `integer` is an int, a `number` is always a double (so `self * 1.5`
// works on `2`), strings of format duration/date/date-time/byte are durations,
// timestamps and bytes. An object shows its declared fields only, with names escaped
// (`x-mode` is `self.x__dash__mode`); a whole object (the root, an embedded resource)
// also shows apiVersion, kind and metadata.name/generateName. `set` and `map` lists
// keep their order (so `self[0]` is what the user wrote) but compare equal in any
// order: the environment's `==` consults listShapes.
import {
  celEnv,
  celList,
  celMap,
  isCelError,
  isCelList,
  isCelMap,
  parse,
  plan,
  type CelValue,
} from '@bufbuild/cel';
import { isObject, isProperty, type OpenApiSchema } from './structural-types.ts';

/** The list type of a `set` or `map` list value (by identity). */
export const listShapes = new WeakMap<object, { type: 'set' | 'map'; keys: string[] }>();

const KEYWORDS = new Set([
  'true',
  'false',
  'null',
  'in',
  'as',
  'break',
  'const',
  'continue',
  'else',
  'for',
  'function',
  'if',
  'import',
  'let',
  'loop',
  'package',
  'namespace',
  'return',
  'var',
  'void',
  'while',
]);

/**
 * A property's name in a rule: keywords become `__kw__`; `__`, `.`, `-` and `/` become
 * `__underscores__`, `__dot__`, `__dash__`, `__slash__`. A name with other characters,
 * or a leading digit, cannot be reached from a rule (undefined).
 */
export function celFieldName(name: string): string | undefined {
  if (!/^[A-Za-z_][A-Za-z0-9_./-]*$/.test(name)) return undefined;
  if (KEYWORDS.has(name)) return `__${name}__`;
  const escapes: Record<string, string> = {
    __: '__underscores__',
    '.': '__dot__',
    '-': '__dash__',
    '/': '__slash__',
  };
  return name.replace(/__|[./-]/g, (m) => escapes[m] ?? m);
}

const std = celEnv();
const durationOf = plan(std, parse('duration(s)'));
const timestampOf = plan(std, parse('timestamp(s)'));

function typed(fn: typeof durationOf, text: string, fallback: string): CelValue {
  const v = fn({ s: text });
  return isCelError(v) ? fallback : v;
}

/** A value without a schema: whole numbers are ints, as JSON decoding gives them. */
function untyped(v: unknown): CelValue {
  if (Array.isArray(v)) return celList(v.map(untyped));
  if (isObject(v)) return celMap(new Map(Object.entries(v).map(([k, x]) => [k, untyped(x)])));
  if (typeof v === 'number') return Number.isInteger(v) ? BigInt(v) : v;
  if (typeof v === 'string' || typeof v === 'boolean') return v;
  return null;
}

function stringValue(v: string, format: string | undefined): CelValue {
  switch (format) {
    case 'duration':
      return typed(durationOf, v, v);
    case 'date':
      return typed(timestampOf, `${v}T00:00:00Z`, v);
    case 'date-time':
    case 'datetime':
      return typed(timestampOf, v, v);
    case 'byte':
      return new Uint8Array(Buffer.from(v, 'base64'));
    default:
      return v;
  }
}

/** A JSON value as a CEL value under `schema`; `whole`: a root or embedded object. */
export function celValue(v: unknown, schema: OpenApiSchema | undefined, whole = false): CelValue {
  if (v === null || v === undefined) return null;
  if (!schema || schema['x-kubernetes-int-or-string'] === true) return untyped(v);
  const type = schema.type;
  if (type === 'number' && typeof v === 'number') return v;
  if (type === 'string' && typeof v === 'string') return stringValue(v, schema.format);
  if (type === 'array' && Array.isArray(v)) {
    const list = celList(v.map((item) => celValue(item, schema.items)));
    const listType = schema['x-kubernetes-list-type'];
    if (listType === 'set' || listType === 'map') {
      listShapes.set(list, { type: listType, keys: schema['x-kubernetes-list-map-keys'] ?? [] });
    }
    return list;
  }
  if (type === 'object' && isObject(v)) return objectValue(v, schema, whole);
  return untyped(v);
}

function objectValue(v: Record<string, unknown>, schema: OpenApiSchema, whole: boolean): CelValue {
  const typeMeta = whole || schema['x-kubernetes-embedded-resource'] === true;
  const extra = isObject(schema.additionalProperties) ? schema.additionalProperties : undefined;
  const fields = new Map<string, CelValue>();
  for (const [key, x] of Object.entries(v)) {
    if (isProperty(schema, key)) {
      if (typeMeta && key === 'metadata') fields.set(key, metadataValue(x));
      else {
        const name = celFieldName(key);
        if (name !== undefined) fields.set(name, celValue(x, schema.properties?.[key]));
      }
    } else if (typeMeta && (key === 'apiVersion' || key === 'kind')) fields.set(key, untyped(x));
    else if (typeMeta && key === 'metadata') fields.set(key, metadataValue(x));
    else if (extra) fields.set(key, celValue(x, extra));
    else if (schema['x-kubernetes-preserve-unknown-fields'] === true) fields.set(key, untyped(x));
  }
  return celMap(fields);
}

/** Rules see only the name and generateName of an object's metadata. */
function metadataValue(meta: unknown): CelValue {
  const out = new Map<string, CelValue>();
  if (isObject(meta)) {
    for (const k of ['name', 'generateName']) if (typeof meta[k] === 'string') out.set(k, meta[k]);
  }
  return celMap(out);
}

/** CEL equality, except that `set` and `map` lists (and lists inside) ignore order. */
export function celEqual(a: CelValue, b: CelValue): boolean {
  if (isCelList(a) && isCelList(b)) {
    if (a.size !== b.size) return false;
    const xs = [...a];
    const ys = [...b];
    const shape = listShapes.get(a) ?? listShapes.get(b);
    if (shape?.type === 'set') {
      return (
        xs.every((x) => ys.some((y) => celEqual(x, y))) &&
        ys.every((y) => xs.some((x) => celEqual(x, y)))
      );
    }
    if (shape?.type === 'map') {
      const sameKeys = (x: CelValue, y: CelValue): boolean =>
        isCelMap(x) &&
        isCelMap(y) &&
        shape.keys.every((k) => {
          const p = x.get(k);
          const q = y.get(k);
          return p === undefined || q === undefined ? p === q : celEqual(p, q);
        });
      return xs.every((x) => {
        const y = ys.find((c) => sameKeys(x, c));
        return y !== undefined && celEqual(x, y);
      });
    }
    return xs.every((x, i) => celEqual(x, ys[i] ?? null));
  }
  if (isCelMap(a) && isCelMap(b)) {
    if (a.size !== b.size) return false;
    for (const [k, x] of a) {
      const y = b.get(k);
      if (y === undefined || !celEqual(x, y)) return false;
    }
    return true;
  }
  if (isCelList(a) || isCelList(b) || isCelMap(a) || isCelMap(b)) return false;
  return stdEqual({ a, b }) === true;
}
const stdEqual = plan(std, parse('a == b'));
