// Response headers a trigger configures: the X-Correlation-ID / X-Request-ID /
// X-Timestamp toggles and custom headers; and the rule for every header a trigger or a
// workflow's respond node sets (settableResponseHeader: no framing, hop-by-hop, cookie,
// CORS or origin-wide header, and a value HTTP can carry). Admission checks a trigger's
// custom headers; they are checked again here, for a record admitted by an older CRD
// (one bad value would fail every answer of the endpoint).
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
  for (const { name, value } of h.custom) setAuthorHeader(reply, name, value);
}

/**
 * Sets a header a trigger or a respond node asked for, when the rule allows it; one it
 * does not is left out (the rest of the answer is sent). A Vary is added to the one
 * the answer has (CORS's `Vary: Origin`), not put in its place.
 */
export function setAuthorHeader(reply: FastifyReply, name: string, value: unknown): void {
  if (!settableResponseHeader(name, value)) return;
  if (name.toLowerCase() === 'vary') addVary(reply, value);
  else reply.header(name, value);
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
