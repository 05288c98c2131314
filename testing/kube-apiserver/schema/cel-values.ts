// JSON values as CEL sees them in `x-kubernetes-validations` rules, typed by the schema
// (CRD docs, "Validation rules" type table): objects with properties are maps of their
// declared fields only, `integer` is int, `number` is always double, int-or-string is
// int or string, strings with format `duration`, `date`, `date-time` and `byte` are
// duration, timestamp and bytes. Lists typed `set` or `map` compare equal in any order,
// so equality is re-implemented for lists and maps. `optionalOldSelf` gives `oldSelf`
// an optional type, modelled here as a tagged map (`@bufbuild/cel` has none).
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
import { isObject, property, type OpenApiSchema } from './types.ts';

interface ListKind {
  type: 'set' | 'map';
  keys: string[];
}
const listKinds = new WeakMap<object, ListKind>();
const optionals = new WeakMap<object, { value: CelValue | undefined }>();

const std = celEnv();
const stdEquals = plan(std, parse('a == b'));
const toTimestamp = plan(std, parse('timestamp(s)'));
const toDuration = plan(std, parse('duration(s)'));

/** The `optional` namespace (`optional.none()`, `optional.of(x)`). */
export const OPTIONAL_NAMESPACE: CelValue = celMap(new Map([['@optional-namespace', true]]));

export function celOptional(value: CelValue | undefined): CelValue {
  const m = celMap(new Map([['@optional', value !== undefined]]));
  optionals.set(m, { value });
  return m;
}

/** The content of an optional made by celOptional, or undefined for other values. */
export function optionalContent(v: CelValue): { value: CelValue | undefined } | undefined {
  return typeof v === 'object' && v !== null ? optionals.get(v) : undefined;
}

const RESERVED = new Set(
  'true false null in as break const continue else for function if import let loop package namespace return var void while'.split(
    ' ',
  ),
);

/**
 * A property name as rules spell it: CEL keywords become `__name__`, and `__`, `.`,
 * `-`, `/` become `__underscores__`, `__dot__`, `__dash__`, `__slash__`. Names with
 * other characters, or starting with a digit, are not accessible (undefined).
 */
export function escapeField(name: string): string | undefined {
  if (name === '' || /^[0-9]/.test(name) || /[^A-Za-z0-9_./-]/.test(name)) return undefined;
  if (RESERVED.has(name)) return `__${name}__`;
  return name.replace(/__|[./-]/g, (m) =>
    m === '__' ? '__underscores__' : m === '.' ? '__dot__' : m === '-' ? '__dash__' : '__slash__',
  );
}

function generic(v: unknown): CelValue {
  if (Array.isArray(v)) return celList(v.map(generic));
  if (isObject(v)) return celMap(new Map(Object.entries(v).map(([k, x]) => [k, generic(x)])));
  if (typeof v === 'number' && Number.isInteger(v)) return BigInt(v);
  if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return v;
  return null;
}

function fromString(v: string, format: string | undefined): CelValue {
  const convert = (fn: typeof toTimestamp, text: string): CelValue => {
    const out = fn({ s: text });
    return isCelError(out) ? v : out;
  };
  if (format === 'duration') return convert(toDuration, v);
  if (format === 'date-time' || format === 'datetime') return convert(toTimestamp, v);
  if (format === 'date') return convert(toTimestamp, `${v}T00:00:00Z`);
  if (format === 'byte') return new Uint8Array(Buffer.from(v, 'base64'));
  return v;
}

/**
 * A JSON value as a CEL value under `schema`. `typeMeta`: the value is a whole object
 * (the resource root or an embedded resource), whose apiVersion, kind and
 * metadata.name/generateName rules may read.
 */
export function toCel(v: unknown, s: OpenApiSchema | undefined, typeMeta = false): CelValue {
  if (v === null || v === undefined) return null;
  if (!s || s['x-kubernetes-int-or-string']) return generic(v);
  if (s.type === 'object' && isObject(v)) return objectToCel(v, s, typeMeta);
  if (s.type === 'array' && Array.isArray(v)) return listToCel(v, s);
  if (s.type === 'string' && typeof v === 'string') return fromString(v, s.format);
  if (s.type === 'number' && typeof v === 'number') return v;
  return generic(v);
}

function objectToCel(v: Record<string, unknown>, s: OpenApiSchema, typeMeta: boolean): CelValue {
  const meta = typeMeta || s['x-kubernetes-embedded-resource'] === true;
  const additional = isObject(s.additionalProperties) ? s.additionalProperties : undefined;
  const entries: [string, CelValue][] = [];
  for (const [k, x] of Object.entries(v)) {
    const prop = property(s, k);
    const name = prop ? escapeField(k) : undefined;
    if (meta && !prop && (k === 'apiVersion' || k === 'kind')) entries.push([k, generic(x)]);
    else if (meta && k === 'metadata' && isObject(x)) entries.push([k, visibleMeta(x)]);
    else if (prop) {
      if (name !== undefined) entries.push([name, toCel(x, prop)]);
    } else if (additional) entries.push([k, toCel(x, additional)]);
    else if (s['x-kubernetes-preserve-unknown-fields']) entries.push([k, generic(x)]);
  }
  return celMap(new Map(entries));
}

function listToCel(v: unknown[], s: OpenApiSchema): CelValue {
  const list = celList(v.map((x) => toCel(x, s.items)));
  const type = s['x-kubernetes-list-type'];
  if (type === 'set' || type === 'map') {
    listKinds.set(list, { type, keys: s['x-kubernetes-list-map-keys'] ?? [] });
  }
  return list;
}

function visibleMeta(meta: Record<string, unknown>): CelValue {
  const out = new Map<string, CelValue>();
  for (const k of ['name', 'generateName']) {
    if (typeof meta[k] === 'string') out.set(k, meta[k]);
  }
  return celMap(out);
}

/**
 * The name of a `map` list's element: its key fields' values, as Kubernetes keys the
 * elements of such a list (apiserver/pkg/cel/common/values.go, unstructuredMapList).
 * Key fields are scalars; a missing one is a key of its own.
 */
function mapListKey(element: CelValue, keys: string[]): string | undefined {
  if (!isCelMap(element)) return undefined;
  return keys
    .map((k) => {
      const v = element.get(k);
      if (v === undefined) return '-';
      // Map keys are scalars (the CRD's schema says so); anything else names no element.
      if (typeof v === 'object' || typeof v === 'function' || typeof v === 'symbol') return '?';
      return `${typeof v}:${String(v)}`;
    })
    .join('\u0000');
}

/**
 * List equality by list type, as values.go's Equal methods do it: a `map` list indexes
 * one side by key and looks each element of the other up; a `set` list (its elements
 * unique) is equal when as long and containing each of the other's elements; any other
 * list compares element by element, in order.
 */
function listEquals(a: CelValue[], b: CelValue[], kind: ListKind | undefined): boolean {
  if (a.length !== b.length) return false;
  if (kind?.type === 'map') {
    const byKey = new Map<string, CelValue>();
    for (const x of a) {
      const key = mapListKey(x, kind.keys);
      if (key !== undefined) byKey.set(key, x);
    }
    for (const y of b) {
      const key = mapListKey(y, kind.keys);
      const x = key === undefined ? undefined : byKey.get(key);
      if (x === undefined || !celEquals(x, y)) return false;
    }
    return true;
  }
  if (kind?.type === 'set') return b.every((y) => a.some((x) => celEquals(x, y)));
  for (let i = 0; i < a.length; i++)
    if (!celEquals(a[i] as CelValue, b[i] as CelValue)) return false;
  return true;
}

/** CEL equality in which `set` and `map` lists ignore order (and so do lists inside). */
export function celEquals(a: CelValue, b: CelValue): boolean {
  if (isCelList(a) && isCelList(b)) {
    return listEquals([...a], [...b], listKinds.get(a) ?? listKinds.get(b));
  }
  if (isCelMap(a) && isCelMap(b)) {
    if (a.size !== b.size) return false;
    for (const [k, x] of a) {
      const y = b.get(k);
      if (y === undefined || !celEquals(x, y)) return false;
    }
    return true;
  }
  if (isCelList(a) || isCelList(b) || isCelMap(a) || isCelMap(b)) return false;
  return stdEquals({ a, b }) === true;
}
