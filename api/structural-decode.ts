// Decoding a custom resource as the API server does before validating it: unknown fields
// are pruned (and reported, for strict field validation), nulls on fields that are not
// nullable are dropped, then defaults are applied.
import { childSchema, isObject, isProperty, type OpenApiSchema } from './structural-types.ts';

/** Fields every whole object (the root, an embedded resource) has without declaring them. */
const TYPE_META = ['apiVersion', 'kind', 'metadata'];

/** ObjectMeta's fields (apimachinery meta/v1): an embedded resource's metadata keeps only these. */
export const OBJECT_META = new Set([
  'name',
  'generateName',
  'namespace',
  'selfLink',
  'uid',
  'resourceVersion',
  'generation',
  'creationTimestamp',
  'deletionTimestamp',
  'deletionGracePeriodSeconds',
  'labels',
  'annotations',
  'ownerReferences',
  'finalizers',
  'managedFields',
]);

const join = (path: string, key: string): string => (path ? `${path}.${key}` : key);

/**
 * Remove fields the schema does not know (in place) and return their paths, sorted.
 * `root`: `value` is a whole object, whose apiVersion, kind and metadata are implicit.
 */
export function pruneUnknown(
  value: unknown,
  schema: OpenApiSchema,
  path: string,
  root: boolean,
): string[] {
  const found: string[] = [];
  const meta: string[] = [];
  pruneNode(value, schema, path, root, found, meta);
  return [...found.sort(), ...meta];
}

function pruneNode(
  value: unknown,
  schema: OpenApiSchema | undefined,
  path: string,
  whole: boolean,
  found: string[],
  meta: string[],
): void {
  walkPrune(
    value,
    schema,
    path,
    whole,
    schema?.['x-kubernetes-preserve-unknown-fields'] === true,
    found,
    meta,
  );
}

/** `lenient`: below x-kubernetes-preserve-unknown-fields (list items inherit it). */
function walkPrune(
  value: unknown,
  schema: OpenApiSchema | undefined,
  path: string,
  whole: boolean,
  lenient: boolean,
  found: string[],
  meta: string[],
): void {
  if (Array.isArray(value)) {
    const items = schema?.items;
    value.forEach((item, i) => {
      const itemPath = `${path}[${i}]`;
      if (lenient) {
        if (items) walkPrune(item, items, itemPath, false, true, found, meta);
      } else pruneNode(item, items, itemPath, false, found, meta);
    });
    return;
  }
  if (!isObject(value)) return;
  const embedded = whole || schema?.['x-kubernetes-embedded-resource'] === true;
  for (const key of Object.keys(value)) {
    if (embedded && TYPE_META.includes(key)) continue;
    const child = childSchema(schema, key);
    if (child) pruneNode(value[key], child, join(path, key), false, found, meta);
    else if (!lenient) {
      found.push(join(path, key));
      delete value[key];
    }
  }
  if (embedded && !whole && isObject(value.metadata)) {
    const metadata = value.metadata;
    for (const key of Object.keys(metadata)) {
      if (OBJECT_META.has(key)) continue;
      meta.push(`${join(path, 'metadata')}.${key}`);
      delete metadata[key];
    }
  }
}

const droppable = (v: unknown, s: OpenApiSchema | undefined): boolean =>
  v === null && s !== undefined && s.nullable !== true;

/**
 * Apply defaults after pruning, as the API server does: a `null` on a field that is not
 * nullable is dropped (and then defaulted, if the field has a default), a missing field
 * with a default gets a deep copy of it, and defaults inside defaults apply too.
 */
export function defaultFields(value: unknown, schema: OpenApiSchema | undefined): void {
  if (!schema) return;
  if (Array.isArray(value)) {
    const items = schema.items;
    value.forEach((item, i) => {
      if (droppable(item, items) && items?.default !== undefined) {
        value[i] = structuredClone(items.default);
      }
      defaultFields(value[i], items);
    });
    return;
  }
  if (!isObject(value)) return;
  for (const key of Object.keys(value)) {
    const child = childSchema(schema, key);
    // A JavaScript `undefined` is an absent field, as JSON has it.
    if (value[key] === undefined) delete value[key];
    else if (droppable(value[key], child)) {
      if (child?.default === undefined) delete value[key];
      else value[key] = structuredClone(child.default);
    }
  }
  for (const [key, child] of Object.entries(schema.properties ?? {})) {
    if (child.default !== undefined && !Object.hasOwn(value, key)) {
      value[key] = structuredClone(child.default);
    }
  }
  for (const key of Object.keys(value)) {
    defaultFields(
      value[key],
      isProperty(schema, key) ? schema.properties?.[key] : childSchema(schema, key),
    );
  }
}
