// Work-queue keys of the objects a reconcile loop watches: `<kind>/<namespace>/<name>`.
import type { ObjectRef, SourceKind } from '../sources/ports.ts';

export function refKey(ref: ObjectRef): string {
  return `${ref.kind}/${ref.namespace}/${ref.name}`;
}

export function parseRefKey(key: string): ObjectRef {
  const [kind, namespace, ...rest] = key.split('/');
  return { kind: kind as SourceKind, namespace: namespace ?? '', name: rest.join('/') };
}
