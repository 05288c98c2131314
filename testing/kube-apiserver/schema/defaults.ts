// Defaulting (CRD docs, "Defaulting and Nullable"), in the API server's order: after
// pruning, a `null` on a field that is not `nullable` is dropped when the field has no
// default, and replaced by the default when it has one; then every missing field with
// a default gets a deep copy of it, and defaulting continues inside what was just
// defaulted. A `nullable` field keeps its null and is not defaulted.
import { fieldSchema, isObject, property, type OpenApiSchema } from './types.ts';

const nonNullableNull = (x: unknown, s: OpenApiSchema | undefined): boolean =>
  x === null && s !== undefined && s.nullable !== true;

/** Drop nulls on non-nullable fields that have no default (those get defaulted later). */
export function pruneNulls(x: unknown, s: OpenApiSchema | undefined): void {
  if (Array.isArray(x)) {
    for (const item of x) pruneNulls(item, s?.items);
    return;
  }
  if (!isObject(x)) return;
  for (const key of Object.keys(x)) {
    const sub = fieldSchema(s, key);
    if (nonNullableNull(x[key], sub) && sub?.default === undefined) delete x[key];
    else pruneNulls(x[key], sub);
  }
}

/** Apply defaults in place. */
export function applyDefaults(x: unknown, s: OpenApiSchema | undefined): void {
  if (!s) return;
  if (Array.isArray(x)) {
    x.forEach((item, i) => {
      if (nonNullableNull(item, s.items) && s.items?.default !== undefined) {
        x[i] = structuredClone(s.items.default);
      }
      applyDefaults(x[i], s.items);
    });
    return;
  }
  if (!isObject(x)) return;
  for (const [key, prop] of Object.entries(s.properties ?? {})) {
    if (prop.default === undefined) continue;
    if (!Object.hasOwn(x, key) || nonNullableNull(x[key], prop)) {
      x[key] = structuredClone(prop.default);
    }
  }
  const additional = isObject(s.additionalProperties) ? s.additionalProperties : undefined;
  for (const key of Object.keys(x)) {
    const prop = property(s, key);
    if (prop) {
      applyDefaults(x[key], prop);
    } else if (additional) {
      if (nonNullableNull(x[key], additional) && additional.default !== undefined) {
        x[key] = structuredClone(additional.default);
      }
      applyDefaults(x[key], additional);
    }
  }
}
