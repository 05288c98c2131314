// The URL scheme: the workflow identifier, base path, route path and webhook URL.
// Part of the contract: the operator publishes these in status, gateways serve them.
//
// The workflow identifier is `<namespace>_<environment>_<name>` (ADR 0022). `_` cannot
// occur in any of the three: namespaces are DNS-1123 labels, names DNS-1123
// subdomains (lower-case letters, digits, `-`, `.`) and environments an enum. So the
// identifier splits back into exactly one triple, and no tenant can pick a namespace
// and name that lands on another tenant's URL (the old `-` join could:
// `team-development`/`staging`/`x` and `team`/`development`/`staging-x`).
//
// Anything outside `[a-z0-9.-]` in a part (never in objects an API server admitted;
// the embedded source checks the same rules) is escaped as `~` and two hex digits per
// UTF-8 byte, `~` and `_` included, so the encoding stays injective for any input
// rather than failing: `parseWorkflowIdentifier` inverts it.

/** The separator between namespace, environment and name. */
export const IDENTIFIER_SEPARATOR = '_';

/** A DNS-1123 label (a namespace): at most 63 characters. */
export const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
export const DNS1123_LABEL_MAX = 63;
/** A DNS-1123 subdomain (an object name): at most 253 characters. */
export const DNS1123_SUBDOMAIN =
  /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
export const DNS1123_SUBDOMAIN_MAX = 253;

export const isNamespaceName = (value: string): boolean =>
  value.length <= DNS1123_LABEL_MAX && DNS1123_LABEL.test(value);
export const isObjectName = (value: string): boolean =>
  value.length <= DNS1123_SUBDOMAIN_MAX && DNS1123_SUBDOMAIN.test(value);

const KEPT = /^[a-z0-9.-]$/;
const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

/** One part of the identifier: kept as is when it is a valid name, else escaped. */
function encodePart(value: string): string {
  let out = '';
  for (const char of value) {
    if (KEPT.test(char)) {
      out += char;
      continue;
    }
    for (const byte of encoder.encode(char)) out += `~${byte.toString(16).padStart(2, '0')}`;
  }
  return out;
}

function decodePart(value: string): string | undefined {
  const bytes: number[] = [];
  for (let i = 0; i < value.length; i++) {
    const char = value[i] as string;
    if (char === '~') {
      const hex = value.slice(i + 1, i + 3);
      if (!/^[0-9a-f]{2}$/.test(hex)) return undefined;
      bytes.push(Number.parseInt(hex, 16));
      i += 2;
    } else if (KEPT.test(char)) {
      bytes.push(char.charCodeAt(0));
    } else {
      return undefined;
    }
  }
  try {
    return decoder.decode(new Uint8Array(bytes));
  } catch {
    return undefined;
  }
}

/**
 * Workflow identifier: tenant (namespace), environment and workflow name joined by
 * `_`, e.g. `shop_production_orders`. Injective: distinct triples never share one.
 */
export function workflowIdentifier(namespace: string, environment: string, name: string): string {
  return [namespace, environment, name].map(encodePart).join(IDENTIFIER_SEPARATOR);
}

/** The triple an identifier was made from; undefined for a string no triple makes. */
export function parseWorkflowIdentifier(
  id: string,
): { namespace: string; environment: string; name: string } | undefined {
  const parts = id.split(IDENTIFIER_SEPARATOR);
  if (parts.length !== 3) return undefined;
  const [namespace, environment, name] = parts.map(decodePart);
  if (namespace === undefined || environment === undefined || name === undefined) return undefined;
  // Only the canonical spelling: `~61` for a kept `a` would decode too.
  if (workflowIdentifier(namespace, environment, name) !== id) return undefined;
  return { namespace, environment, name };
}

/** The read-only base path of a workflow's endpoints. */
export function basePath(workflowId: string): string {
  return `/webhook/${workflowId}`;
}

/** Path template of one endpoint, e.g. /webhook/shop_production_orders/ingest/:id */
export function routePath(workflowId: string, pathSegment: string): string {
  return `${basePath(workflowId)}/${pathSegment}`;
}

/** The generated webhook URL shown to users. */
/**
 * Why `raw` cannot be the public base URL that webhookUrl() puts before each path, or
 * undefined: it must be an absolute http(s) URL without a query or a fragment.
 */
export function baseUrlProblem(raw: string): string | undefined {
  const url = URL.parse(raw);
  if (url?.protocol !== 'http:' && url?.protocol !== 'https:')
    return `"${raw}" is not an absolute http or https URL`;
  if (raw.includes('?') || raw.includes('#'))
    return `"${raw}" has a query or a fragment, which would come before the webhook paths`;
  return undefined;
}

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
