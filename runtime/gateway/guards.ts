// The request-path protections, composed from the security and body modules into the
// Guards the webhook pipeline calls.
import type { TLSSocket } from 'node:tls';
import type { FastifyRequest } from 'fastify';
import type { RouteRecord } from '../../api/records/records.ts';
import { schemasFor, validateInput } from './body/schemas.ts';
import { HttpProblem } from '../errors.ts';
import {
  authHeaderNameFor,
  createAuthenticator,
  type Authenticator,
} from './security/auth/index.ts';
import { corsHeaders, preflight } from './security/cors.ts';
import { checkHttps, parseTrustedProxies } from './security/https.ts';
import {
  EndpointRateLimiter,
  type RateLimitDecision,
  type RateLimitOutcome,
} from './security/rate-limit.ts';
import { SignatureVerifier } from './security/auth/signature/verify.ts';
import type { ReplayStore } from './security/auth/signature/replay.ts';
import type { Guards } from './webhook-routes.ts';
import type { OutboundGuard } from '../engine/outbound/guard.ts';
import type { AuthOutboundRefusal } from './security/auth/outbound-fetch.ts';
import type { StaleJwksUse } from './security/auth/jwks-last-good.ts';

export interface GuardOptions {
  /** CIDRs of proxies whose X-Forwarded-Proto is believed (none by default). */
  trustedProxies?: string[];
  /** The gateway's own origin: same-origin browser requests need no CORS. */
  sameOrigin?: string;
  rateLimiter?: EndpointRateLimiter;
  /** Told about every rate-limit decision on a limited endpoint (metrics). */
  onRateLimit?: (decision: RateLimitOutcome) => void;
  authenticator?: Authenticator;
  /**
   * The process's outbound guard: the JWKS fetches and token introspection of the
   * default authenticator go through it (with the trigger's namespace policy).
   */
  outbound?: OutboundGuard;
  /** Told when the outbound policy refuses a JWKS or introspection request (the log). */
  onOutboundRefused?: (refusal: AuthOutboundRefusal) => void;
  /** Told when a failed JWKS refresh is answered with the last good key set (the log). */
  onJwksStale?: (route: RouteRecord, use: StaleJwksUse) => void;
  /** Where signed deliveries are remembered to refuse replays (memory or Redis). */
  replay?: ReplayStore;
  /** The clock of signature timestamps (tests). */
  now?: () => number;
}

export function createGuards(options: GuardOptions = {}): Guards {
  const trustedProxies = options.trustedProxies ?? [];
  parseTrustedProxies(trustedProxies); // a bad CIDR fails at startup, not per request
  const limiter = options.rateLimiter ?? new EndpointRateLimiter();
  const authenticator =
    options.authenticator ??
    createAuthenticator({
      ...(options.outbound ? { outbound: options.outbound } : {}),
      ...(options.onOutboundRefused ? { onOutboundRefused: options.onOutboundRefused } : {}),
      ...(options.onJwksStale ? { onJwksStale: options.onJwksStale } : {}),
    });
  const signatures = new SignatureVerifier({
    ...(options.replay ? { replay: options.replay } : {}),
    ...(options.now ? { now: options.now } : {}),
  });
  const allowed = (decision: RateLimitDecision): Record<string, string> => {
    options.onRateLimit?.(
      decision.degraded ? 'failed_open' : decision.shadowed === true ? 'shadowed' : 'allowed',
    );
    return decision.headers;
  };
  /** Counts a rejection (not a store failure) and hands the error back to throw. */
  const counted = (error: unknown): unknown => {
    if (error instanceof HttpProblem && error.code === 'HG_ERR_RATE_LIMITED')
      options.onRateLimit?.('rejected');
    else if (error instanceof HttpProblem && error.code === 'HG_ERR_RATE_LIMIT_UNAVAILABLE')
      options.onRateLimit?.('failed_closed');
    return error;
  };
  return {
    https(route: RouteRecord, request: FastifyRequest) {
      checkHttps(
        route,
        {
          encrypted: (request.raw.socket as Partial<TLSSocket>).encrypted === true,
          remoteAddress: request.raw.socket.remoteAddress,
          headers: request.headers,
        },
        trustedProxies,
      );
    },
    preflight(route: RouteRecord, request: FastifyRequest) {
      const header = request.headers['access-control-request-headers'];
      return preflight(
        route.spec.cors,
        request.headers.origin,
        request.headers['access-control-request-method'],
        typeof header === 'string' ? header : undefined,
        route.spec.methods,
        authHeaderNameFor(route),
      );
    },
    cors(route: RouteRecord, request: FastifyRequest) {
      return corsHeaders(
        route.spec.cors,
        request.headers.origin,
        request.method,
        options.sameOrigin,
      );
    },
    authenticate(route: RouteRecord, request: FastifyRequest) {
      // A signed delivery: what its headers alone can prove, before its body is read
      // (the signature itself is checked on the body: verifySignature).
      if (route.spec.auth?.method === 'signature') {
        signatures.checkHeaders(route, request.headers);
        return {};
      }
      return authenticator(route, request.headers);
    },
    verifySignature(route: RouteRecord, request: FastifyRequest, body: Buffer, deferIdClaim) {
      return signatures.verify(route, request.headers, body, { deferIdClaim });
    },
    rateLimit(route: RouteRecord) {
      if (!route.spec.rateLimit) return {};
      // The in-memory limiter decides synchronously: a promise only for Redis.
      let decision: ReturnType<EndpointRateLimiter['consume']>;
      try {
        decision = limiter.consume(route);
      } catch (error) {
        throw counted(error);
      }
      if (!(decision instanceof Promise)) return allowed(decision);
      return decision.then(allowed, (error: unknown) => {
        throw counted(error);
      });
    },
    validateInput(route: RouteRecord, body: unknown, contentType?: string) {
      validateInput(schemasFor(route).input, body, contentType);
    },
    removed(route: RouteRecord) {
      // The rate-limit count is kept by route key, so that it carries over to the
      // route's next generation; compiled schemas and auth keys go with the record.
      limiter.forget(route.key);
    },
  };
}
