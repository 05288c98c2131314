// OAuth 2.0 with scope-based access control (spec: Authentication 4; acceptance rule G4).
//
// Tokens are JWT access tokens checked against the provider's JWKS (jwksUrl, see jwt.ts)
// or opaque tokens checked by RFC 7662 introspection:
// - POST application/x-www-form-urlencoded `token=…&token_type_hint=access_token` to the
//   endpoint with HTTP Basic client credentials (clientId + the Secret's client secret,
//   each form-urlencoded first, RFC 6749 §2.3.1); redirects are not followed.
// - The answer must say `active: true`; then `exp`/`nbf` (with clockToleranceSeconds),
//   `iss` (exact) and `aud` (one of audiences) are checked when present.
// - Active answers are cached per route and token digest for
//   min(cacheSeconds, exp − now); inactive answers and failures are not cached. The
//   cache of a route is kept with its route record (the route table keeps one record
//   object per route version), so it goes when the route changes or leaves.
// - The endpoint unreachable, slow (timeoutMs, default 5 s), answering non-2xx or
//   non-JSON → 503 auth-unavailable: fail closed, never "let it through".
// - The POST goes through the outbound guard (outbound-fetch.ts: the cluster policy
//   narrowed by the trigger's namespace, https unless the policy names the
//   destination); a refused endpoint is the same 503 as an unreachable one for the
//   caller, and a report (onOutboundRefused) for the operator.
// Scopes: every requiredScopes entry must be in the space-separated `scope` claim (or
// the `scp` array some providers use); otherwise 403 insufficient-scope with
// `WWW-Authenticate: Bearer error="insufficient_scope", scope="<required>"`.
import { createHash } from 'node:crypto';
import type { WebhookTriggerSpec } from '../../../../api/v1alpha1/index.ts';
import { HttpProblem } from '../../../errors.ts';
import type { RouteRecord } from '../../../../api/records/records.ts';
import type { HeaderMap } from '../headers.ts';
import type { OutboundGuard } from '../../../engine/outbound/guard.ts';
import {
  AUTH_PROTOCOLS,
  RefusalReporter,
  guardedFetch,
  lazyGuard,
  scopeFor,
  type AuthFetchInit,
  type AuthOutboundOptions,
} from './outbound-fetch.ts';
import {
  authUnavailable,
  bearerChallenge,
  bearerToken,
  consumerOf,
  defaultJwtVerifier,
  invalidToken,
  JwtVerifier,
} from './jwt.ts';

export type OAuth2Config = NonNullable<NonNullable<WebhookTriggerSpec['auth']>['oauth2']>;

type Claims = Record<string, unknown>;
type CachedAnswer = { claims: Claims; expiresAt: number };
type Introspection = NonNullable<OAuth2Config['introspection']>;

export interface OAuth2VerifierOptions extends AuthOutboundOptions {
  /** Verifies JWT access tokens (jwksUrl); default: one with this verifier's guard. */
  jwt?: JwtVerifier;
  /**
   * Sends the introspection request instead of the guard's connection pool (tests). The
   * URL is still checked by the guard first (scheme, literal addresses, names).
   */
  fetch?: (url: string, init: AuthFetchInit) => Promise<Response>;
  /** Introspection timeout (default 5000 ms). */
  timeoutMs?: number;
  /** The clock in milliseconds (tests). */
  now?: () => number;
  /** Largest number of cached introspection answers per route (default 10 000). */
  maxCacheEntries?: number;
}

/** The scopes a token carries: `scope` (space-separated) or `scp` (array or string). */
export function tokenScopes(claims: Claims): Set<string> {
  const raw = claims.scope ?? claims.scp;
  const list =
    typeof raw === 'string'
      ? raw.split(' ')
      : Array.isArray(raw)
        ? raw.filter((s): s is string => typeof s === 'string')
        : [];
  return new Set(list.filter((s) => s !== ''));
}

/** Throws 403 insufficient_scope unless every required scope is present. */
export function checkScopes(claims: Claims, required: readonly string[]): void {
  if (required.length === 0) return;
  const granted = tokenScopes(claims);
  const missing = required.filter((s) => !granted.has(s));
  if (missing.length === 0) return;
  throw new HttpProblem(
    'HG_ERR_INSUFFICIENT_SCOPE',
    `The access token lacks the required scope${missing.length === 1 ? '' : 's'}: ${missing.join(' ')}.`,
    {
      headers: {
        'WWW-Authenticate': bearerChallenge({
          error: 'insufficient_scope',
          scope: required.join(' '),
        }),
      },
      extensions: { requiredScopes: [...required], missingScopes: missing },
    },
  );
}

function basicAuth(clientId: string, secret: string): string {
  const encode = (s: string) => encodeURIComponent(s).replace(/%20/g, '+');
  return `Basic ${Buffer.from(`${encode(clientId)}:${encode(secret)}`).toString('base64')}`;
}

function audienceMatches(aud: unknown, audiences: readonly string[]): boolean {
  const list = typeof aud === 'string' ? [aud] : Array.isArray(aud) ? aud : [];
  return list.some((a) => typeof a === 'string' && audiences.includes(a));
}

export class OAuth2Verifier {
  readonly #jwt: JwtVerifier;
  readonly #fetch: OAuth2VerifierOptions['fetch'];
  readonly #guard: () => OutboundGuard;
  readonly #refusals: RefusalReporter;
  readonly #timeoutMs: number;
  readonly #now: () => number;
  readonly #maxEntries: number;
  /** Per route record: token digest → answer, oldest first. */
  readonly #cache = new WeakMap<RouteRecord, Map<string, CachedAnswer>>();

  constructor(options: OAuth2VerifierOptions = {}) {
    // JWT access tokens (jwksUrl) go out under the same guard as introspection.
    this.#jwt =
      options.jwt ??
      (options.outbound || options.onOutboundRefused
        ? new JwtVerifier({
            ...(options.outbound ? { outbound: options.outbound } : {}),
            ...(options.onOutboundRefused ? { onOutboundRefused: options.onOutboundRefused } : {}),
          })
        : defaultJwtVerifier);
    this.#fetch = options.fetch;
    this.#guard = lazyGuard(options.outbound);
    this.#refusals = new RefusalReporter(options.onOutboundRefused);
    this.#timeoutMs = options.timeoutMs ?? 5000;
    this.#now = options.now ?? Date.now;
    this.#maxEntries = options.maxCacheEntries ?? 10_000;
  }

  /** Authenticates the request's bearer token and checks its scopes. */
  async authenticate(route: RouteRecord, headers: HeaderMap): Promise<{ consumer?: string }> {
    const config = route.spec.auth?.oauth2;
    if (!config) throw new HttpProblem('HG_ERR_INTERNAL', 'OAuth 2.0 is not configured.');
    const token = bearerToken(headers);
    const claims = config.introspection
      ? await this.#introspect(route, config, config.introspection, token)
      : await this.#jwt.verify(route, config, token);
    checkScopes(claims, config.requiredScopes ?? []);
    const consumer = consumerOf(claims);
    return consumer === undefined ? {} : { consumer };
  }

  async #introspect(
    route: RouteRecord,
    config: OAuth2Config,
    introspection: Introspection,
    token: string,
  ): Promise<Claims> {
    const cacheKey = createHash('sha256').update(token).digest('hex');
    const now = this.#now();
    const cache = this.#cache.get(route);
    const hit = cache?.get(cacheKey);
    if (hit && hit.expiresAt > now) return hit.claims;
    if (hit) cache?.delete(cacheKey);

    const claims = await this.#callEndpoint(route, introspection, token);
    this.#checkIntrospected(claims, config, now);

    const ttlMs = Math.min(
      (introspection.cacheSeconds ?? 60) * 1000,
      typeof claims.exp === 'number' ? claims.exp * 1000 - now : Infinity,
    );
    if (ttlMs > 0) this.#remember(route, cacheKey, { claims, expiresAt: now + ttlMs });
    return claims;
  }

  #remember(route: RouteRecord, cacheKey: string, answer: CachedAnswer): void {
    let cache = this.#cache.get(route);
    if (!cache) {
      cache = new Map();
      this.#cache.set(route, cache);
    }
    if (cache.size >= this.#maxEntries) {
      const oldest = cache.keys().next();
      if (!oldest.done) cache.delete(oldest.value);
    }
    cache.set(cacheKey, answer);
  }

  async #callEndpoint(
    route: RouteRecord,
    introspection: Introspection,
    token: string,
  ): Promise<Claims> {
    const secret = route.credentials.introspectionClientSecret;
    if (secret === undefined) {
      throw authUnavailable('The token introspection client secret is not configured.');
    }
    let response: Response;
    try {
      const scope = scopeFor(this.#guard(), route.namespace);
      let send = guardedFetch(() => scope, this.#timeoutMs);
      if (this.#fetch) {
        // Whatever sends it, the destination is checked first.
        scope.check(introspection.url, { protocols: AUTH_PROTOCOLS });
        send = this.#fetch;
      }
      response = await send(introspection.url, {
        method: 'POST',
        headers: {
          authorization: basicAuth(introspection.clientId, secret),
          'content-type': 'application/x-www-form-urlencoded',
          accept: 'application/json',
        },
        body: new URLSearchParams({ token, token_type_hint: 'access_token' }).toString(),
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
    } catch (error) {
      this.#refusals.check(route, 'introspection', error);
      // Refused, unreachable or slow alike: the caller learns nothing of the network.
      throw authUnavailable('The token introspection endpoint is unreachable; try again later.');
    }
    let body: unknown;
    try {
      body = response.ok ? await response.json() : undefined;
    } catch {
      body = undefined;
    }
    if (!response.ok || typeof body !== 'object' || body === null || Array.isArray(body)) {
      await response.body?.cancel().catch(() => {});
      throw authUnavailable(
        'The token introspection endpoint did not answer usefully; try again later.',
      );
    }
    return body as Claims;
  }

  #checkIntrospected(claims: Claims, config: OAuth2Config, now: number): void {
    if (claims.active !== true) throw invalidToken('The token is not active');
    const toleranceMs = (config.clockToleranceSeconds ?? 30) * 1000;
    if (typeof claims.exp === 'number' && claims.exp * 1000 <= now - toleranceMs) {
      throw invalidToken('The token has expired');
    }
    if (typeof claims.nbf === 'number' && claims.nbf * 1000 > now + toleranceMs) {
      throw invalidToken('The token is not yet valid');
    }
    if (claims.iss !== undefined && claims.iss !== config.issuer) {
      throw invalidToken('The token issuer is not accepted');
    }
    if (claims.aud !== undefined && !audienceMatches(claims.aud, config.audiences)) {
      throw invalidToken('The token audience is not accepted');
    }
  }

  /** Number of introspection answers cached for a route (tests). */
  cachedAnswers(route: RouteRecord): number {
    return this.#cache.get(route)?.size ?? 0;
  }
}

export const defaultOAuth2Verifier = new OAuth2Verifier();

export function authenticateOAuth2(
  route: RouteRecord,
  headers: HeaderMap,
  verifier: OAuth2Verifier = defaultOAuth2Verifier,
): Promise<{ consumer?: string }> {
  return verifier.authenticate(route, headers);
}
