// Names derived from resources: the workflow identifier, base path, URL and keys.
import type { ObjectRef, SourceKind } from '../sources/ports.ts';

/** Lower-case, `[a-z0-9-]` only, no leading/trailing or doubled dashes. */
export function slug(value: string): string {
  return value
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '');
}

/** Workflow identifier: tenant (namespace) + environment + workflow name, slugged. */
export function workflowIdentifier(namespace: string, environment: string, name: string): string {
  return slug(`${namespace}-${environment}-${name}`);
}

/** The read-only base path of a workflow's endpoints. */
export function basePath(workflowId: string): string {
  return `/webhook/${workflowId}`;
}

/** Path template of one endpoint, e.g. /webhook/shop-production-orders/ingest/:id */
export function routePath(workflowId: string, pathSegment: string): string {
  return `${basePath(workflowId)}/${pathSegment}`;
}

/** The generated webhook URL shown to users. */
export function webhookUrl(baseUrl: string, workflowId: string, pathSegment: string): string {
  return `${baseUrl.replace(/\/+$/, '')}${routePath(workflowId, pathSegment)}`;
}

/**
 * The shape two paths share when they would serve the same requests: parameter
 * names do not matter (`orders/:id` and `orders/:orderId` collide).
 */
export function pathShape(path: string): string {
  return path
    .split('/')
    .map((part) => (part.startsWith(':') ? ':' : part))
    .join('/');
}

export function refKey(ref: ObjectRef): string {
  return `${ref.kind}/${ref.namespace}/${ref.name}`;
}

export function parseRefKey(key: string): ObjectRef {
  const [kind, namespace, ...rest] = key.split('/');
  return { kind: kind as SourceKind, namespace: namespace ?? '', name: rest.join('/') };
}
