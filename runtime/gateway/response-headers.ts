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
 * does not is left out (the rest of the answer is sent).
 */
export function setAuthorHeader(reply: FastifyReply, name: string, value: unknown): void {
  if (settableResponseHeader(name, value)) reply.header(name, value);
}
