// What the informer cache keeps of each object: only what the reconcilers, the status
// and finalizer writes and the Events read, as controller-runtime's cache transforms
// do (cache.TransformStripManagedFields and friends). Everything else the API server
// sends is dropped on the way in, before the object is stored:
//
// - `metadata.managedFields` (often larger than the object itself) and every other
//   metadata field except identity, versioning, deletion and finalizers; labels and
//   annotations too, so the `kubectl.kubernetes.io/last-applied-configuration`
//   annotation (a second copy of the whole manifest) never reaches the cache;
// - for Secrets, everything but `data` (no `stringData` echo, no `type`).
//
// A slimmed object must never be written back whole: finalizers are changed with a
// merge patch and status through the `/status` subresource (kube-writes.ts), neither of
// which can drop what the cache left out.
import type { KubeObject } from './kube-resources.ts';
import type { SourceKind } from './ports.ts';

/** The metadata fields the cache keeps. */
const KEPT_METADATA = [
  'name',
  'namespace',
  'uid',
  'resourceVersion',
  'generation',
  'creationTimestamp',
  'deletionTimestamp',
  'finalizers',
] as const;

/**
 * Short strings shared by every cached object instead of one copy per object and per
 * event from JSON.parse: namespaces, apiVersion and kind, and in spec and status the
 * condition types, statuses, reasons, timestamps, modes, workflow identifiers... (a
 * third of a trigger's cached bytes). Bounded: strings of at most 64 characters, and
 * the table starts over when it holds 16,384 of them; objects keep what they share.
 */
const interned = new Map<string, string>();
const MAX_INTERNED = 16_384;
const MAX_INTERNED_LENGTH = 64;
function intern(value: string): string {
  if (value.length > MAX_INTERNED_LENGTH) return value;
  const known = interned.get(value);
  if (known !== undefined) return known;
  if (interned.size >= MAX_INTERNED) interned.clear();
  interned.set(value, value);
  return value;
}

/** Replace the short strings of a freshly parsed JSON value by their shared copies, in place. */
function internDeep(value: unknown): unknown {
  if (typeof value === 'string') return intern(value);
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) value[i] = internDeep(value[i]);
  } else if (typeof value === 'object' && value !== null) {
    const record = value as Record<string, unknown>;
    for (const key in record) record[key] = internDeep(record[key]);
  }
  return value;
}

/**
 * A copy of `obj` with only the fields the operator reads. `apiVersion` and `kind` are
 * filled in when the API server left them out (items of built-in lists).
 */
export function slim(
  obj: KubeObject,
  kind: SourceKind,
  apiVersion: string,
): KubeObject & Record<string, unknown> {
  const source: Record<string, unknown> = obj.metadata ?? {};
  const metadata: Record<string, unknown> = {};
  for (const field of KEPT_METADATA) {
    const value = source[field];
    if (value === undefined) continue;
    // Names and uids are unique; the namespace, the creation second and the
    // finalizers repeat.
    const shared = field === 'namespace' || field === 'creationTimestamp' || field === 'finalizers';
    metadata[field] = shared ? internDeep(value) : value;
  }
  const out: KubeObject & Record<string, unknown> = {
    apiVersion: intern(obj.apiVersion ?? apiVersion),
    kind: intern(obj.kind ?? kind),
    metadata,
  };
  if (kind === 'Secret') {
    if (obj.data !== undefined) out.data = obj.data;
    return out;
  }
  // spec and status are taken over, not copied: they come from JSON.parse and are ours.
  const raw = obj as KubeObject & { spec?: unknown };
  if (raw.spec !== undefined) out.spec = internDeep(raw.spec);
  if (raw.status !== undefined) out.status = internDeep(raw.status);
  return out;
}
