// CORS for browser callers (spec: "enable CORS"; 403 "CORS not enabled for a browser
// caller"; acceptance rule G8).
//
// - Origins are compared exactly: scheme://host:port after normalising case and default
//   ports (`https://EXAMPLE.com:443` = `https://example.com`). No patterns, no suffixes:
//   `https://evilexample.com` does not match `https://example.com`.
// - `null` and anything that is not a plain http(s) origin is never allowed.
// - `*` answers `Access-Control-Allow-Origin: *` only without credentials; with
//   credentials the allowed origin is echoed, never `*` (the CRD forbids `*` together
//   with allowCredentials; here `*` then simply matches nothing).
// - `Vary: Origin` is sent on every answer of a CORS-enabled endpoint, so caches never
//   serve one origin's answer to another. Merge it with any other Vary value.
// - A request carrying an Origin that is not allowed (or any Origin when CORS is off)
//   is refused with 403 cors-origin-denied before the workflow runs: refusing only the
//   response headers would still let a cross-site form post start an execution.
//   Requests without Origin (servers, curl) are not CORS requests and pass; so does a
//   same-origin browser request when the caller passes `sameOrigin`.
import type { WebhookTriggerSpec } from '../../../api/v1alpha1/index.ts';
import { HttpProblem } from '../../errors.ts';

export type CorsConfig = NonNullable<WebhookTriggerSpec['cors']>;

/**
 * Request headers a browser may always send to a CORS-enabled endpoint, besides the
 * route's auth header and cors.allowedHeaders: the gateway's own request headers.
 */
export const GATEWAY_REQUEST_HEADERS = [
  'content-type',
  'idempotency-key',
  'x-callback-url',
  'x-correlation-id',
  'x-request-id',
] as const;

const ORIGIN_SHAPE = /^https?:\/\/[^/?#@\s,]+$/i;

/** `scheme://host[:port]` in canonical form, or undefined when it is not an http(s) origin. */
export function normaliseOrigin(origin: string): string | undefined {
  const text = origin.trim();
  if (!ORIGIN_SHAPE.test(text)) return undefined;
  try {
    const url = new URL(text);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
    if (url.hostname === '') return undefined;
    return `${url.protocol}//${url.host}`; // host is lower-case, default port dropped
  } catch {
    return undefined;
  }
}

/** Whether a browser Origin is on the endpoint's allow-list (exact comparison). */
export function isOriginAllowed(cors: CorsConfig, origin: string): boolean {
  const wanted = normaliseOrigin(origin);
  if (wanted === undefined) return false;
  return cors.allowedOrigins.some((allowed) =>
    allowed === '*' ? !cors.allowCredentials : normaliseOrigin(allowed) === wanted,
  );
}

function denied(origin: string, cors: CorsConfig | undefined): HttpProblem {
  return new HttpProblem(
    'HG_ERR_CORS_ORIGIN_DENIED',
    cors?.enabled
      ? 'This origin is not allowed to call the endpoint from a browser.'
      : 'CORS is not enabled for this endpoint; browser callers from other origins are refused.',
    {
      headers: cors?.enabled ? { Vary: 'Origin' } : {},
      extensions: { origin: origin.slice(0, 512) },
    },
  );
}

function isSameOrigin(origin: string, sameOrigin: string | undefined): boolean {
  if (sameOrigin === undefined) return false;
  const a = normaliseOrigin(origin);
  return a !== undefined && a === normaliseOrigin(sameOrigin);
}

function allowOriginHeaders(cors: CorsConfig, origin: string): Record<string, string> {
  const wildcard = !cors.allowCredentials && cors.allowedOrigins.includes('*');
  return {
    'Access-Control-Allow-Origin': wildcard ? '*' : origin,
    ...(cors.allowCredentials ? { 'Access-Control-Allow-Credentials': 'true' } : {}),
  };
}

/**
 * Headers for an actual (non-preflight) request. `origin` is the request's Origin
 * header; `sameOrigin` optionally the endpoint's own origin (scheme://host) so that
 * same-origin browser requests pass. Throws 403 for a refused browser origin.
 * `_method` is accepted for symmetry with preflight(); actual requests do not depend on it.
 */
export function corsHeaders(
  cors: CorsConfig | undefined,
  origin: string | undefined,
  _method: string,
  sameOrigin?: string,
): Record<string, string> {
  const enabled = cors?.enabled === true;
  const vary: Record<string, string> = enabled ? { Vary: 'Origin' } : {};
  if (origin === undefined) return vary;
  if (enabled && isOriginAllowed(cors, origin)) {
    return {
      ...allowOriginHeaders(cors, origin),
      ...(cors.exposedHeaders.length > 0
        ? { 'Access-Control-Expose-Headers': cors.exposedHeaders.join(', ') }
        : {}),
      ...vary,
    };
  }
  if (isSameOrigin(origin, sameOrigin)) return vary;
  throw denied(origin, cors);
}

/** Whether a request is a CORS preflight: OPTIONS with Origin and Access-Control-Request-Method. */
export function isPreflight(
  method: string,
  origin: string | undefined,
  requestedMethod: string | undefined,
): boolean {
  return (
    method.toUpperCase() === 'OPTIONS' && origin !== undefined && requestedMethod !== undefined
  );
}

/**
 * Headers for the 204 answer to a preflight. Throws 403 when the origin is refused (or
 * CORS is off). A requested method that is not enabled, or a requested header that is
 * not allowed, is simply left out of the Allow lists: the browser then refuses the call
 * (so `_requestedMethod` does not change the answer: every enabled method is listed).
 */
export function preflight(
  cors: CorsConfig | undefined,
  origin: string | undefined,
  _requestedMethod: string | undefined,
  requestedHeaders: string | undefined,
  enabledMethods: readonly string[],
  authHeaderName: string | undefined,
): Record<string, string> {
  if (!cors?.enabled || origin === undefined || !isOriginAllowed(cors, origin)) {
    throw denied(origin ?? '', cors);
  }
  const allowedHeaders = new Set<string>([
    ...GATEWAY_REQUEST_HEADERS,
    ...cors.allowedHeaders.map((h) => h.toLowerCase()),
    ...(authHeaderName ? [authHeaderName.toLowerCase()] : []),
  ]);
  const granted = (requestedHeaders ?? '')
    .split(',')
    .map((h) => h.trim().toLowerCase())
    .filter((h) => h !== '' && allowedHeaders.has(h));
  return {
    ...allowOriginHeaders(cors, origin),
    'Access-Control-Allow-Methods': enabledMethods.join(', '),
    ...(granted.length > 0
      ? { 'Access-Control-Allow-Headers': [...new Set(granted)].join(', ') }
      : {}),
    'Access-Control-Max-Age': String(cors.maxAgeSeconds),
    Vary: 'Origin, Access-Control-Request-Method, Access-Control-Request-Headers',
  };
}
