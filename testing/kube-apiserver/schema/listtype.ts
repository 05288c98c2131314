// `x-kubernetes-list-type`: a `set` holds no value twice, a `map` holds no two items with
// the same values of its `x-kubernetes-list-map-keys` (a missing key counts as a value of
// its own). Each repeated value is reported once, at its second occurrence, as
// `Duplicate value: "a"` or `Duplicate value: {"name":"a"}`.
import { fe } from './errors.ts';
import {
  canonicalJson,
  FieldPath,
  isObject,
  property,
  type FieldError,
  type OpenApiSchema,
} from './types.ts';

const MISSING = '\u0000missing';

/** A comparable identity: scalars by type and value, compounds by canonical JSON. */
function identity(v: unknown): string {
  return v === undefined ? MISSING : `${typeof v}:${canonicalJson(v)}`;
}

/** Indices of the second occurrence of each repeated identity. */
function repeats(ids: string[]): number[] {
  const seen = new Map<string, number>();
  const out: number[] = [];
  ids.forEach((id, i) => {
    const times = seen.get(id) ?? 0;
    if (times === 1) out.push(i);
    seen.set(id, times + 1);
  });
  return out;
}

export function validateListTypes(value: unknown, schema: OpenApiSchema | undefined): FieldError[] {
  const out: FieldError[] = [];
  walk(value, schema, FieldPath.root, out);
  return out;
}

function walk(x: unknown, s: OpenApiSchema | undefined, path: FieldPath, out: FieldError[]): void {
  if (!s) return;
  if (Array.isArray(x)) {
    checkList(x, s, path, out);
    x.forEach((item, i) => walk(item, s.items, path.index(i), out));
  } else if (isObject(x)) {
    for (const [k, v] of Object.entries(x)) {
      if (isObject(s.additionalProperties)) walk(v, s.additionalProperties, path.key(k), out);
      const prop = property(s, k);
      if (prop) walk(v, prop, path.child(k), out);
    }
  }
}

function checkList(x: unknown[], s: OpenApiSchema, path: FieldPath, out: FieldError[]): void {
  const type = s['x-kubernetes-list-type'];
  if (type === 'set') {
    for (const i of repeats(x.map(identity))) out.push(fe.duplicate(path.index(i), x[i]));
    return;
  }
  if (type !== 'map') return;
  const bad = x.findIndex((item) => item !== null && !isObject(item));
  if (bad >= 0) {
    out.push(
      fe.invalid(path.index(bad), x[bad], 'must be an object for an array of list-type map'),
    );
    return;
  }
  const keys = s['x-kubernetes-list-map-keys'] ?? [];
  const keyValues = x.map((item) => {
    const present: Record<string, unknown> = {};
    for (const k of keys) {
      if (isObject(item) && Object.hasOwn(item, k)) present[k] = item[k];
    }
    return present;
  });
  const ids =
    keys.length === 1
      ? keyValues.map((kv) => identity(kv[keys[0] ?? '']))
      : keyValues.map((kv) => identity(kv));
  for (const i of repeats(ids)) out.push(fe.duplicate(path.index(i), keyValues[i]));
}
