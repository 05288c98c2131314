// OAuth 2.0 with scope-based access control (spec: Authentication 4; acceptance rule G4).
//
// Tokens are JWT access tokens checked against the provider's JWKS (jwksUrl, see jwt.ts;
// their `typ` too when requiredType is set, e.g. at+jwt: an ID token is refused) or
// opaque tokens checked by RFC 7662 introspection:
// - POST application/x-www-form-urlencoded `token=…&token_type_hint=access_token` to the
//   endpoint with HTTP Basic client credentials (clientId + the Secret's client secret,
//   each form-urlencoded first, RFC 6749 §2.3.1); redirects are not followed.
// - The answer must say `active: true`; then `exp`/`nbf` (with clockToleranceSeconds)
//   when present, and `iss` (exact) and `aud` (one of audiences) always: the trigger
//   names both (the CRD requires them), and an answer without them does not show the
//   token was issued for this endpoint (RFC 7662 makes them optional; RFC 8725 §3.9).
// - Active answers are cached per route and token digest for
//   min(cacheSeconds, exp − now). A token the provider's answer refuses (inactive,
//   expired, another issuer or audience) is remembered as refused for a short time
//   (negativeCacheMs, 10 s), so a token sent again and again costs one call per 10 s;
//   failures are not cached per token (a provider failure starts the route's
//   cooldown, below). Both caches are bounded (maxCacheEntries each) and keyed
//   by a SHA-256 of the token, never the token. They are kept with the route record
//   (the route table keeps one record object per route version), so they go when the
//   route changes or leaves.
// - Calls are bounded per route: one call per token at a time (requests with a token
//   whose introspection is in flight wait for its answer), and at most
//   maxConcurrentCalls (8) calls in flight; beyond that, 503 auth-overloaded with
//   Retry-After: 1, without a call. Random tokens (each one new) therefore cost at most
//   8 calls at a time per route, not one per request, and tokens already cached keep
//   working while the cap is full.
// - The endpoint unreachable, slow (timeoutMs, default 5 s), answering non-2xx or
//   non-JSON → 503 auth-unavailable: fail closed, never "let it through".
// - A provider failure (the call throws: unreachable, refused by the outbound policy,
//   timed out; or a 5xx or 429 answer) starts a cooldown per route
//   (introspectionFailureCooldownMs, 5 s, the 503's Retry-After): meanwhile a token
//   that needs a call gets the failure's 503 without one, so a provider that is down
//   gets one round of calls per 5 s from a route, not one per request. Cached answers
//   (active or refused) are answered as before. Other answers that are no use (another
//   4xx, a body that is not a JSON object) start none: they say nothing of the
//   provider being down. A cooldown never lasts longer than its length, whatever the
//   wall clock does (coolingDown: stepped back, its end is too far away, and it is over).
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
  coolingDown,
  defaultJwtVerifier,
  invalidToken,
  JwtVerifier,
} from './jwt.ts';

export type OAuth2Config = NonNullable<NonNullable<WebhookTriggerSpec['auth']>['oauth2']>;

type Claims = Record<string, unknown>;
type CachedAnswer = { claims: Claims; expiresAt: number };
/** Why the provider's answer refused a token (the 401's description), until when. */
type CachedRefusal = { description: string; expiresAt: number };
type Introspection = NonNullable<OAuth2Config['introspection']>;

/** What a route record keeps of introspection; every map is keyed by token digest. */
interface RouteIntrospection {
  /** Active answers, oldest first. */
  answers: Map<string, CachedAnswer>;
  /** Refused tokens, oldest first. */
  refused: Map<string, CachedRefusal>;
  /** Calls in flight, one per token (single flight); its size is the route's calls. */
  inFlight: Map<string, Promise<Claims>>;
  /** The last provider failure's 503 detail, answered without a call until `until`. */
  failing?: { detail: string; until: number };
}

/** Introspection calls in flight per route at most (default). */
export const MAX_CONCURRENT_INTROSPECTIONS = 8;
/** How long a token the provider refused is refused without asking again (default, ms). */
export const INTROSPECTION_NEGATIVE_CACHE_MS = 10_000;
/** After a provider failure: tokens that need a call get its 503 without one (default, ms). */
export const INTROSPECTION_FAILURE_COOLDOWN_MS = 5_000;

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
  /**
   * Largest number of cached introspection answers per route (default 10 000); the
   * same bound for tokens remembered as refused.
   */
  maxCacheEntries?: number;
  /** Introspection calls in flight per route at most; beyond, 503 auth-overloaded (default 8). */
  maxConcurrentCalls?: number;
  /**
   * How long a token the provider's answer refused is refused again without a call
   * (default 10 s; 0: not remembered).
   */
  negativeCacheMs?: number;
  /**
   * After a provider failure (unreachable, refused, timed out, 5xx, 429), tokens that
   * need a call are answered with its 503 for this long without one (default 5 s, the
   * 503's Retry-After; 0: no cooldown).
   */
  introspectionFailureCooldownMs?: number;
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

/** 503 auth-overloaded: the route's introspection calls are all in flight. */
function introspectionOverloaded(): HttpProblem {
  return new HttpProblem(
    'HG_ERR_AUTH_OVERLOADED',
    'Too many access tokens of this endpoint are being checked right now; try again shortly.',
    { headers: { 'Retry-After': '1' } },
  );
}

/** Keeps `value` under `key`, dropping the oldest entry when the map is full. */
function rememberBounded<V>(map: Map<string, V>, key: string, value: V, max: number): void {
  map.delete(key);
  if (map.size >= max) {
    const oldest = map.keys().next();
    if (!oldest.done) map.delete(oldest.value);
  }
  map.set(key, value);
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
  readonly #maxConcurrent: number;
  readonly #negativeMs: number;
  readonly #failureCooldownMs: number;
  /** Per route record: its cached answers, refused tokens and calls in flight. */
  readonly #routes = new WeakMap<RouteRecord, RouteIntrospection>();

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
    this.#maxConcurrent = options.maxConcurrentCalls ?? MAX_CONCURRENT_INTROSPECTIONS;
    this.#negativeMs = options.negativeCacheMs ?? INTROSPECTION_NEGATIVE_CACHE_MS;
    this.#failureCooldownMs =
      options.introspectionFailureCooldownMs ?? INTROSPECTION_FAILURE_COOLDOWN_MS;
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

  #introspect(
    route: RouteRecord,
    config: OAuth2Config,
    introspection: Introspection,
    token: string,
  ): Promise<Claims> {
    const digest = createHash('sha256').update(token).digest('hex');
    const now = this.#now();
    const state = this.#stateOf(route);
    const hit = state.answers.get(digest);
    if (hit && hit.expiresAt > now) return Promise.resolve(hit.claims);
    if (hit) state.answers.delete(digest);
    const refused = state.refused.get(digest);
    if (refused && refused.expiresAt > now) throw invalidToken(refused.description);
    if (refused) state.refused.delete(digest);
    // One call per token: the same token sent meanwhile waits for its answer.
    const pending = state.inFlight.get(digest);
    if (pending) return pending;
    // The provider failed moments ago: its 503 again, without a call.
    if (state.failing !== undefined) {
      if (coolingDown(state.failing.until, now, this.#failureCooldownMs)) {
        throw authUnavailable(state.failing.detail);
      }
      delete state.failing;
    }
    if (state.inFlight.size >= this.#maxConcurrent) throw introspectionOverloaded();
    const call = (async () => {
      try {
        return await this.#introspectNow(route, config, introspection, token, digest, state);
      } finally {
        state.inFlight.delete(digest);
      }
    })();
    state.inFlight.set(digest, call);
    return call;
  }

  /** Asks the provider, judges the answer, and remembers it (an active or refused token). */
  async #introspectNow(
    route: RouteRecord,
    config: OAuth2Config,
    introspection: Introspection,
    token: string,
    digest: string,
    state: RouteIntrospection,
  ): Promise<Claims> {
    const claims = await this.#callEndpoint(route, introspection, token, state);
    const now = this.#now();
    const refusal = refusalOf(claims, config, now);
    if (refusal !== undefined) {
      if (this.#negativeMs > 0) {
        const entry = { description: refusal, expiresAt: now + this.#negativeMs };
        rememberBounded(state.refused, digest, entry, this.#maxEntries);
      }
      throw invalidToken(refusal);
    }
    const ttlMs = Math.min(
      (introspection.cacheSeconds ?? 60) * 1000,
      typeof claims.exp === 'number' ? claims.exp * 1000 - now : Infinity,
    );
    if (ttlMs > 0) {
      const entry = { claims, expiresAt: now + ttlMs };
      rememberBounded(state.answers, digest, entry, this.#maxEntries);
    }
    return claims;
  }

  #stateOf(route: RouteRecord): RouteIntrospection {
    let state = this.#routes.get(route);
    if (!state) {
      state = { answers: new Map(), refused: new Map(), inFlight: new Map() };
      this.#routes.set(route, state);
    }
    return state;
  }

  /** A provider failure: its 503, which tokens that need a call get for the cooldown. */
  #failed(state: RouteIntrospection, detail: string): HttpProblem {
    if (this.#failureCooldownMs > 0) {
      state.failing = { detail, until: this.#now() + this.#failureCooldownMs };
    }
    return authUnavailable(detail);
  }

  async #callEndpoint(
    route: RouteRecord,
    introspection: Introspection,
    token: string,
    state: RouteIntrospection,
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
      throw this.#failed(
        state,
        'The token introspection endpoint is unreachable; try again later.',
      );
    }
    let body: unknown;
    try {
      body = response.ok ? await response.json() : undefined;
    } catch {
      body = undefined;
    }
    if (!response.ok || typeof body !== 'object' || body === null || Array.isArray(body)) {
      await response.body?.cancel().catch(() => {});
      const detail = 'The token introspection endpoint did not answer usefully; try again later.';
      // Down or throttling us: a cooldown. Another answer says nothing of its health.
      if (response.status >= 500 || response.status === 429) throw this.#failed(state, detail);
      throw authUnavailable(detail);
    }
    return body as Claims;
  }

  /** Number of introspection answers cached for a route (tests). */
  cachedAnswers(route: RouteRecord): number {
    return this.#routes.get(route)?.answers.size ?? 0;
  }

  /** Number of tokens remembered as refused for a route (tests). */
  refusedTokens(route: RouteRecord): number {
    return this.#routes.get(route)?.refused.size ?? 0;
  }
}

/**
 * Why an introspection answer refuses the token (the invalid_token description), or
 * undefined when it is accepted: `active` exactly true, then exp and nbf when present,
 * iss and aud always (an answer without them is refused: the trigger names both).
 */
function refusalOf(claims: Claims, config: OAuth2Config, now: number): string | undefined {
  if (claims.active !== true) return 'The token is not active';
  const toleranceMs = (config.clockToleranceSeconds ?? 30) * 1000;
  if (typeof claims.exp === 'number' && claims.exp * 1000 <= now - toleranceMs) {
    return 'The token has expired';
  }
  if (typeof claims.nbf === 'number' && claims.nbf * 1000 > now + toleranceMs) {
    return 'The token is not yet valid';
  }
  if (claims.iss !== config.issuer) {
    return 'The token issuer is not accepted';
  }
  if (!audienceMatches(claims.aud, config.audiences)) {
    return 'The token audience is not accepted';
  }
  return undefined;
}

export const defaultOAuth2Verifier = new OAuth2Verifier();

export function authenticateOAuth2(
  route: RouteRecord,
  headers: HeaderMap,
  verifier: OAuth2Verifier = defaultOAuth2Verifier,
): Promise<{ consumer?: string }> {
  return verifier.authenticate(route, headers);
}
