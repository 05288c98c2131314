// Checks after the OpenAPI schema: `x-kubernetes-list-type` uniqueness (a `set` holds no
// value twice, a `map` no two items with the same key values; reported once, at the
// second occurrence, as `Duplicate value: {"name":"a"}`), and embedded resources
// (`x-kubernetes-embedded-resource`), which need an apiVersion and a kind.
import { shownValue } from './structural-messages.ts';
import {
  canonicalJson,
  isObject,
  isProperty,
  type FieldError,
  type OpenApiSchema,
} from './structural-types.ts';

const child = (path: string, key: string): string => (path ? `${path}.${key}` : key);

/** List-type and embedded-resource errors of a whole value. */
export function listAndEmbeddedErrors(
  value: unknown,
  schema: OpenApiSchema | undefined,
  path: string,
): { lists: FieldError[]; embedded: FieldError[] } {
  const out = { lists: [] as FieldError[], embedded: [] as FieldError[] };
  walk(value, schema, path, true, out);
  return out;
}

function walk(
  x: unknown,
  s: OpenApiSchema | undefined,
  path: string,
  top: boolean,
  out: { lists: FieldError[]; embedded: FieldError[] },
): void {
  if (!s) return;
  if (Array.isArray(x)) {
    duplicates(x, s, path, out.lists);
    x.forEach((item, i) => walk(item, s.items, `${path}[${i}]`, false, out));
    return;
  }
  if (!isObject(x)) return;
  if (s['x-kubernetes-embedded-resource'] === true && !top) embedded(x, path, out.embedded);
  for (const [k, v] of Object.entries(x)) {
    if (isProperty(s, k)) walk(v, s.properties?.[k], child(path, k), false, out);
    else if (isObject(s.additionalProperties)) {
      walk(v, s.additionalProperties, `${path}[${k}]`, false, out);
    }
  }
}

const identity = (v: unknown): string =>
  v === undefined ? '\u0000absent' : `${typeof v}:${canonicalJson(v)}`;

function duplicates(list: unknown[], s: OpenApiSchema, path: string, out: FieldError[]): void {
  const type = s['x-kubernetes-list-type'];
  if (type !== 'set' && type !== 'map') return;
  const dup = (i: number, shown: string): void => {
    out.push({
      field: `${path}[${i}]`,
      message: `Duplicate value: ${shown}`,
      reason: 'FieldValueDuplicate',
    });
  };
  const seen = new Map<string, number>();
  const count = (id: string): number => {
    const n = (seen.get(id) ?? 0) + 1;
    seen.set(id, n);
    return n;
  };
  if (type === 'set') {
    list.forEach((item, i) => {
      if (count(identity(item)) === 2) dup(i, shownValue(item));
    });
    return;
  }
  const notObject = list.findIndex((item) => item !== null && !isObject(item));
  if (notObject >= 0) {
    out.push({
      field: `${path}[${notObject}]`,
      message: `Invalid value: ${shownValue(list[notObject])}: must be an object for an array of list-type map`,
      reason: 'FieldValueInvalid',
    });
    return;
  }
  const keys = s['x-kubernetes-list-map-keys'] ?? [];
  list.forEach((item, i) => {
    const present: Record<string, unknown> = {};
    for (const k of keys) if (isObject(item) && Object.hasOwn(item, k)) present[k] = item[k];
    const id = keys.length === 1 ? identity(present[keys[0] ?? '']) : identity(present);
    if (count(id) === 2) dup(i, shownValue(present));
  });
}

function embedded(x: Record<string, unknown>, path: string, out: FieldError[]): void {
  for (const k of ['apiVersion', 'kind']) {
    const v = x[k];
    const at = child(path, k);
    const bad = (detail: string): void => {
      out.push({
        field: at,
        message: `Invalid value: ${shownValue(v)}: ${detail}`,
        reason: 'FieldValueInvalid',
      });
    };
    if (!Object.hasOwn(x, k))
      out.push({ field: at, message: 'Required value', reason: 'FieldValueRequired' });
    else if (typeof v !== 'string') bad('must be a string');
    else if (v === '') bad('must not be empty');
    else if (k === 'apiVersion' && !/^([^/]+\/)?[^/]+$/.test(v))
      bad(`unexpected GroupVersion string: ${v}`);
    else if (
      k === 'kind' &&
      (v.length > 63 || !/^[a-z]([-a-z0-9]*[a-z0-9])?$/.test(v.toLowerCase()))
    ) {
      bad(
        "may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
      );
    }
  }
  if (x.metadata !== undefined && !isObject(x.metadata)) {
    out.push({
      field: child(path, 'metadata'),
      message: `Invalid value: ${shownValue(x.metadata)}: must be an object`,
      reason: 'FieldValueInvalid',
    });
  }
}
