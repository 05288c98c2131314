// Response headers a trigger configures: the X-Correlation-ID / X-Request-ID /
// X-Timestamp toggles and custom headers (names were screened at admission: no
// framing, hop-by-hop, cookie or CORS headers, no CR/LF in values).
import type { FastifyReply } from 'fastify';
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
  for (const { name, value } of h.custom) reply.header(name, value);
}
