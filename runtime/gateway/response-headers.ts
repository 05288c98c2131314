// Response headers a trigger configures: the X-Correlation-ID / X-Request-ID /
// X-Timestamp toggles and custom headers; and the rule for every header a trigger or a
// workflow's respond node sets (settableResponseHeader: no framing, hop-by-hop, cookie,
// CORS or origin-wide header, and a value HTTP can carry). Admission checks a trigger's
// custom headers; they are checked again here, for a record admitted by an older CRD
// (one bad value would fail every answer of the endpoint).
//
// Every answer of the webhook listener is sandboxed (SANDBOX_HEADERS): a workflow's body
// in a type a browser renders (text/html, SVG, XML) runs in an opaque origin, so a
// tenant's page cannot read the cookies or storage of the host name it shares with other
// tenants and with the admin listener (cookies do not tell ports apart). A trigger's or
// respond node's own Content-Security-Policy is kept with the sandbox in it
// (sandboxedPolicy); its X-Content-Type-Options is left out (the gateway's nosniff stays).
import type { FastifyReply } from 'fastify';
import { settableResponseHeader } from '../../api/v1alpha1/index.ts';
import type { RouteRecord } from '../../api/records/records.ts';
import { isoTime } from './clock.ts';

export function applyResponseHeaders(
  reply: FastifyReply,
  route: RouteRecord,
  ids: { requestId: string; correlationId: string },
): void {
  const h = route.spec.response.headers;
  if (h.correlationId) reply.header('x-correlation-id', ids.correlationId);
  if (h.requestId) reply.header('x-request-id', ids.requestId);
  if (h.timestamp) reply.header('x-timestamp', isoTime(Date.now()));
  for (const { name, value } of settledCustom(h.custom)) {
    if (name === 'vary') addVary(reply, value);
    else reply.header(name, value);
  }
}

type CustomHeader = { name: string; value: string };

/** A route's custom headers as the rule lets them out, worked out once per record. */
const settled = new WeakMap<readonly CustomHeader[], CustomHeader[]>();

/**
 * A trigger's custom headers as setAuthorHeader would set them (refused ones left out,
 * its CSP sandboxed, its nosniff dropped, Vary named in lower case): the record does not
 * change, so the rule runs once per record, not once per request.
 */
function settledCustom(custom: readonly CustomHeader[]): CustomHeader[] {
  let headers = settled.get(custom);
  if (headers) return headers;
  headers = [];
  for (const { name, value } of custom) {
    if (!settableResponseHeader(name, value)) continue;
    const lower = name.toLowerCase();
    if (lower === 'vary') headers.push({ name: lower, value });
    else if (lower === CSP) headers.push({ name: CSP, value: sandboxedPolicy(value) });
    else if (lower !== NOSNIFF) headers.push({ name, value });
  }
  settled.set(custom, headers);
  return headers;
}

/**
 * Sets a header a trigger or a respond node asked for, when the rule allows it; one it
 * does not is left out (the rest of the answer is sent). A Vary is added to the one
 * the answer has (CORS's `Vary: Origin`), not put in its place.
 */
export function setAuthorHeader(reply: FastifyReply, name: string, value: unknown): void {
  if (!settableResponseHeader(name, value)) return;
  const lower = name.toLowerCase();
  if (lower === 'vary') addVary(reply, value);
  else if (lower === CSP) reply.header(CSP, sandboxedPolicy(value));
  else if (lower !== NOSNIFF) reply.header(name, value);
}

const CSP = 'content-security-policy';
const NOSNIFF = 'x-content-type-options';

/**
 * Set on every answer of the webhook listener (onRequest, before anything else): the
 * body, whatever its type, is a document of an opaque origin (no cookies, no storage, no
 * same-origin requests, no scripts unless the author's policy allows them), and is never
 * sniffed into a type a browser renders.
 */
export const SANDBOX_HEADERS = { [CSP]: 'sandbox', [NOSNIFF]: 'nosniff' } as const;

/**
 * The `sandbox` tokens an author's policy may keep: what a page may do inside its opaque
 * origin. Never `allow-same-origin` (it gives the origin back, and with it the cookies),
 * nor `allow-top-navigation*`, `allow-popups-to-escape-sandbox` or
 * `allow-storage-access-by-user-activation`, nor a token this list does not know.
 */
export const KEPT_SANDBOX_TOKENS: ReadonlySet<string> = new Set([
  'allow-downloads',
  'allow-forms',
  'allow-modals',
  'allow-orientation-lock',
  'allow-pointer-lock',
  'allow-popups',
  'allow-presentation',
  'allow-scripts',
]);

/**
 * A trigger's or respond node's Content-Security-Policy with the sandbox in it: each of
 * its policies (a header value may hold several, comma-separated, all enforced) keeps
 * its directives and ends with one `sandbox` directive, the gateway's. That directive
 * keeps the tokens every `sandbox` directive of the author's policies allowed, among
 * KEPT_SANDBOX_TOKENS; without any, it is a bare `sandbox`. So no policy can lift the
 * sandbox, whether a browser combines the policies' sandboxes or takes the last one.
 */
export function sandboxedPolicy(value: string): string {
  let allowed: Set<string> | undefined;
  const policies: string[][] = [];
  for (const policy of value.split(',')) {
    const directives: string[] = [];
    for (const directive of policy.split(';')) {
      const [name = '', ...tokens] = directive.trim().split(/[ \t]+/);
      if (name === '') continue;
      if (name.toLowerCase() !== 'sandbox') {
        directives.push(directive.trim());
        continue;
      }
      const kept = new Set(
        tokens.map((t) => t.toLowerCase()).filter((t) => KEPT_SANDBOX_TOKENS.has(t)),
      );
      allowed = allowed === undefined ? kept : new Set([...allowed].filter((t) => kept.has(t)));
    }
    if (directives.length > 0) policies.push(directives);
  }
  const sandbox = ['sandbox', ...[...(allowed ?? [])].sort()].join(' ');
  if (policies.length === 0) return sandbox;
  return policies.map((directives) => [...directives, sandbox].join('; ')).join(', ');
}

/**
 * Sets the gateway's own headers (CORS, a preflight's, a problem's), a Vary added to
 * the one the answer has: a cache must not lose `Origin` for a trigger's `Accept`, nor
 * the other way round.
 */
export function setHeaders(reply: FastifyReply, headers: Record<string, string>): void {
  for (const [name, value] of Object.entries(headers)) {
    if (name.toLowerCase() === 'vary') addVary(reply, value);
    else reply.header(name, value);
  }
}

/** Adds the fields of `value` to the answer's Vary (each once, any case; `*` wins). */
export function addVary(reply: FastifyReply, value: string): void {
  const fields = new Map<string, string>();
  const current = reply.getHeader('vary');
  const texts = Array.isArray(current) ? current.map(String) : current ? [String(current)] : [];
  for (const field of [...texts, value].flatMap((text) => text.split(','))) {
    const name = field.trim();
    if (name !== '' && !fields.has(name.toLowerCase())) fields.set(name.toLowerCase(), name);
  }
  if (fields.size === 0) return;
  reply.header('vary', fields.has('*') ? '*' : [...fields.values()].join(', '));
}
