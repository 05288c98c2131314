// The URL scheme: the workflow identifier, base path, route path and webhook URL.
// Part of the contract: the operator publishes these in status, gateways serve them.

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
