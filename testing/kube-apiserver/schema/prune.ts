// Pruning (CRD docs, "Field pruning"): fields a structural schema does not specify are
// dropped, and their paths reported so that `fieldValidation` can refuse or warn.
//
// - `x-kubernetes-preserve-unknown-fields: true` keeps unknown fields of that node (and,
//   without a schema, everything below them), but the fields it does specify are still
//   pruned by their own schemas.
// - `additionalProperties` (a schema) makes every key known, pruned by that schema.
// - At the resource root, and in `x-kubernetes-embedded-resource` objects, `apiVersion`,
//   `kind` and `metadata` are always kept; an embedded resource's metadata keeps only
//   the fields of ObjectMeta.
import { fieldSchema, isObject, type OpenApiSchema } from './types.ts';

const TYPE_META = new Set(['apiVersion', 'kind', 'metadata']);

/** ObjectMeta's fields: what survives in the metadata of an embedded resource. */
export const OBJECT_META_FIELDS = new Set([
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

interface Walk {
  pruned: string[];
  embeddedMeta: string[];
}

const keyPath = (parent: string, key: string): string => (parent ? `${parent}.${key}` : key);

/**
 * Remove unknown fields from `value` (in place) and return their paths, sorted as the
 * API server sorts them, followed by unknown fields of embedded resources' metadata.
 * `root`: `value` is a whole object (its apiVersion, kind and metadata are kept).
 */
export function prune(value: unknown, schema: OpenApiSchema | undefined, root = true): string[] {
  const walk: Walk = { pruned: [], embeddedMeta: [] };
  const top = root ? { ...(schema ?? {}), 'x-kubernetes-embedded-resource': true } : schema;
  pruneNode(value, top, '', walk);
  walk.pruned.sort();
  return [...walk.pruned, ...walk.embeddedMeta];
}

function pruneNode(x: unknown, s: OpenApiSchema | undefined, path: string, walk: Walk): void {
  if (s?.['x-kubernetes-preserve-unknown-fields']) {
    keepUnknown(x, s, path, walk);
    return;
  }
  if (Array.isArray(x)) {
    x.forEach((item, i) => pruneNode(item, s?.items, `${path}[${i}]`, walk));
    return;
  }
  if (!isObject(x)) return;
  const embedded = s?.['x-kubernetes-embedded-resource'] === true;
  for (const key of Object.keys(x)) {
    if (embedded && TYPE_META.has(key)) continue;
    const sub = fieldSchema(s, key);
    if (sub) {
      pruneNode(x[key], sub, keyPath(path, key), walk);
    } else {
      // apiVersion/kind/metadata of the root are never reported (they are implicit).
      if (!TYPE_META.has(key) || path !== '') walk.pruned.push(keyPath(path, key));
      delete x[key];
    }
  }
  if (embedded && path !== '') coerceMetadata(x, path, walk);
}

/**
 * Below preserve-unknown-fields: keep unknown keys, prune the specified ones. List
 * items keep the leniency even when their own schema does not repeat the flag.
 */
function keepUnknown(x: unknown, s: OpenApiSchema, path: string, walk: Walk): void {
  if (Array.isArray(x)) {
    x.forEach((item, i) => {
      if (s.items) keepUnknown(item, s.items, `${path}[${i}]`, walk);
    });
    return;
  }
  if (!isObject(x)) return;
  const embedded = s['x-kubernetes-embedded-resource'] === true;
  for (const key of Object.keys(x)) {
    if (embedded && TYPE_META.has(key)) continue;
    const sub = fieldSchema(s, key);
    if (sub) pruneNode(x[key], sub, keyPath(path, key), walk);
  }
  if (embedded && path !== '') coerceMetadata(x, path, walk);
}

/** An embedded resource's metadata is decoded as ObjectMeta: unknown fields go. */
function coerceMetadata(obj: Record<string, unknown>, path: string, walk: Walk): void {
  const meta = obj.metadata;
  if (!isObject(meta)) return;
  for (const key of Object.keys(meta)) {
    if (OBJECT_META_FIELDS.has(key)) continue;
    walk.embeddedMeta.push(`${path}.metadata.${key}`);
    delete meta[key];
  }
}
