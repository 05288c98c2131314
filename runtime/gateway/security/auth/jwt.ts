// Bearer JWT verification (spec: Authentication 3; acceptance rule G3; RFC 8725, RFC 6750).
//
// - The algorithm allow-list comes from the route (`algorithms`), never from the token
//   header; `none` is never accepted (jose refuses it). A static key (keySecretRef)
//   allows exactly one algorithm, so an RS256 key can never be used as an HS256 secret.
//   An HS* secret shorter than its hash (32, 48, 64 bytes; RFC 7518 §3.2) is not
//   usable (503): one token would give it away to an offline search (RFC 8725 §3.5).
// - `iss` must equal `issuer`; `aud` must name one of `audiences`; `exp` is required and,
//   like `nbf`, checked with `clockToleranceSeconds` of leeway; `typ` is checked when
//   `requiredType` is set (e.g. at+jwt, RFC 9068: an ID token is not an access token).
// - With jwksUrl, `kid` is only a lookup key into the JWKS fetched from that URL; `jku`,
//   `x5u` and embedded keys in the token header are ignored.
// - Errors (RFC 6750 §3): no token → 401 credentials-missing with
//   `WWW-Authenticate: Bearer realm="hookgate"`; a bad token → 401 credentials-invalid
//   with `error="invalid_token"` and a fixed error_description; the JWKS endpoint
//   unreachable or broken, or an unusable configured key → 503 auth-unavailable
//   (fail closed).
// - The JWKS is fetched through the outbound guard (outbound-fetch.ts: the cluster
//   policy narrowed by the trigger's namespace, https unless the policy names the
//   destination); a refused destination is the same 503 for the caller and a report
//   (onOutboundRefused) for the operator.
// - JWKS fetches are bounded: jose's createRemoteJWKSet makes one fetch for concurrent
//   callers, keeps the set for cacheMaxAge (10 min) and refetches for an unknown kid at
//   most every cooldownDuration (30 s) after a success. A failed fetch sets no such
//   time in jose, so every request with a well-formed token fetched again; so the
//   fetch itself remembers a failure for jwksFailureCooldownMs (5 s, the 503's
//   Retry-After) and sends nothing meanwhile: those requests get the failure's 503,
//   while tokens whose key the set already holds are still verified. A cooldown never
//   lasts longer than its length, whatever the wall clock does (coolingDown).
// - A set whose refresh fails keeps verifying for up to jwksMaxStaleMs (24 h) after its
//   fetch (jwks-last-good.ts); a kid it lacks is then 503, not 401; past that, 503.
import {
  createRemoteJWKSet,
  customFetch,
  errors as joseErrors,
  importJWK,
  importSPKI,
  importX509,
  jwtVerify,
  type CryptoKey,
  type JWK,
  type JWTPayload,
  type JWTVerifyGetKey,
  type JWTVerifyOptions,
} from 'jose';
import { weakHmacSecret } from '../../../../api/v1alpha1/index.ts';
import { HttpProblem } from '../../../errors.ts';
import type { RouteRecord } from '../../../../api/records/records.ts';
import { headerValue, type HeaderMap } from '../headers.ts';
import {
  RefusalReporter,
  guardedFetch,
  lazyGuard,
  scopeFor,
  type AuthFetchInit,
  type AuthOutboundOptions,
} from './outbound-fetch.ts';
import type { OutboundGuard } from '../../../engine/outbound/guard.ts';
import { JWKS_MAX_STALE_MS, LastGoodJwks, type StaleJwksUse } from './jwks-last-good.ts';

export const REALM = 'hookgate';

/** How long a fetched JWKS is used before it is fetched again (jose's default, named). */
const JWKS_MAX_AGE_MS = 10 * 60_000;

/** The token verification settings shared by spec.auth.bearer and spec.auth.oauth2. */
export interface TokenVerificationConfig {
  issuer: string;
  audiences: string[];
  jwksUrl?: string;
  algorithms: string[];
  clockToleranceSeconds: number;
  requiredType?: string;
}

export interface JwtVerifierOptions extends AuthOutboundOptions {
  /** JWKS HTTP timeout (default 5000 ms). */
  jwksTimeoutMs?: number;
  /** Minimum time between JWKS refetches when a kid is unknown (default 30 s). */
  jwksCooldownMs?: number;
  /**
   * After a failed JWKS fetch, requests are answered with that failure (503) for this
   * long without fetching again (default 5 s, the 503's Retry-After).
   */
  jwksFailureCooldownMs?: number;
  /**
   * How long past its fetch a key set keeps verifying tokens while its refreshes fail
   * (default 24 h; 0: never, every token gets 503 once the set is due, as before).
   */
  jwksMaxStaleMs?: number;
  /** How long a fetched key set is used before it is fetched again (default 10 min). */
  jwksMaxAgeMs?: number;
  /** Told each time a failed refresh is answered with the last good set (the log). */
  onJwksStale?: (route: RouteRecord, use: StaleJwksUse) => void;
  /** The clock (tests): token times, the JWKS failure cooldown and a stale set's age. */
  now?: () => Date;
}

/** After a failed JWKS fetch: requests answered as it was, without a fetch (ms). */
export const JWKS_FAILURE_COOLDOWN_MS = 5_000;

type VerificationKey = CryptoKey | Uint8Array | JWTVerifyGetKey;

function escapeQuoted(text: string): string {
  return text.replace(/[\\"]/g, '').replace(/[^\x20-\x7e]/g, '');
}

/** `Bearer realm="hookgate"` plus RFC 6750 attributes. */
export function bearerChallenge(attributes: Record<string, string> = {}): string {
  const parts = [`realm="${REALM}"`];
  for (const [name, value] of Object.entries(attributes))
    parts.push(`${name}="${escapeQuoted(value)}"`);
  return `Bearer ${parts.join(', ')}`;
}

/** A 401 invalid_token problem with its challenge. */
export function invalidToken(description: string): HttpProblem {
  return new HttpProblem('HG_ERR_CREDENTIALS_INVALID', `${description}.`, {
    headers: {
      'WWW-Authenticate': bearerChallenge({
        error: 'invalid_token',
        error_description: description,
      }),
    },
  });
}

export function authUnavailable(detail: string): HttpProblem {
  return new HttpProblem('HG_ERR_AUTH_UNAVAILABLE', detail, { headers: { 'Retry-After': '5' } });
}

/**
 * Whether a provider failure's cooldown of `lengthMs`, ending at `until`, is still on at
 * `now`. Over when its end is further away than its own length: the wall clock was
 * stepped back since it started (an NTP step, a resumed VM), and the cooldown would
 * otherwise last as long as the step (an hour's step: every caller whose token needs the
 * provider answered 503 without a call for an hour).
 */
export function coolingDown(until: number, now: number, lengthMs: number): boolean {
  const left = until - now;
  return left > 0 && left <= lengthMs;
}

const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;

/** The bearer token of the Authorization header; throws 401 when it is missing or malformed. */
export function bearerToken(headers: HeaderMap): string {
  const authorization = headerValue(headers, 'authorization');
  if (authorization === undefined || !/^Bearer(\s|$)/i.test(authorization.trim())) {
    throw new HttpProblem(
      'HG_ERR_CREDENTIALS_MISSING',
      'Send an access token in the Authorization header (Authorization: Bearer <token>).',
      { headers: { 'WWW-Authenticate': bearerChallenge() } },
    );
  }
  const match = BEARER.exec(authorization.trim());
  if (!match?.[1]) throw invalidToken('The Authorization header is not a valid Bearer token');
  return match[1];
}

/** The consumer a token stands for: `sub`, else `client_id`, else `azp`. */
export function consumerOf(payload: Record<string, unknown>): string | undefined {
  for (const claim of ['sub', 'client_id', 'azp']) {
    const value = payload[claim];
    if (typeof value === 'string' && value !== '') return value;
  }
  return undefined;
}

const CLAIM_DESCRIPTIONS: Record<string, string> = {
  iss: 'The token issuer is not accepted',
  aud: 'The token audience is not accepted',
  nbf: 'The token is not yet valid',
  exp: 'The token has no expiry time',
  iat: 'The token issue time is not valid',
  typ: 'The token type is not accepted',
};

/** The JWKS could not be had: unreachable, broken or refused by the outbound policy alike. */
const JWKS_UNAVAILABLE = () =>
  authUnavailable('The token signing keys could not be fetched; try again later.');

/** Maps a verification failure to 401 invalid_token or, for provider problems, 503. */
export function verificationProblem(error: unknown): HttpProblem {
  if (error instanceof HttpProblem) return error;
  if (error instanceof joseErrors.JWTExpired) return invalidToken('The token has expired');
  if (error instanceof joseErrors.JWTClaimValidationFailed) {
    return invalidToken(CLAIM_DESCRIPTIONS[error.claim] ?? 'A token claim is not accepted');
  }
  if (error instanceof joseErrors.JOSEAlgNotAllowed) {
    return invalidToken('The token signing algorithm is not accepted');
  }
  if (error instanceof joseErrors.JWSSignatureVerificationFailed) {
    return invalidToken('The token signature is invalid');
  }
  if (error instanceof joseErrors.JWKSNoMatchingKey) {
    return invalidToken('No known key matches the token');
  }
  if (error instanceof joseErrors.JWKSMultipleMatchingKeys) {
    return invalidToken('The token does not identify a single key');
  }
  if (
    error instanceof joseErrors.JWSInvalid ||
    error instanceof joseErrors.JWTInvalid ||
    error instanceof joseErrors.JOSENotSupported
  ) {
    return invalidToken('The token is malformed');
  }
  // JWKS timeout, non-200 or unparsable JWKS, network errors: the provider, not the token.
  return JWKS_UNAVAILABLE();
}

type JwksFetch = (url: string, init: AuthFetchInit) => Promise<Response>;

/** The answer jose gets during a cooldown: not 200, so the same 503 as the failure. */
const COOLING_DOWN = () => new Response(null, { status: 503 });

/** A 200 whose body is a JSON object with a `keys` array; anything else is a failure. */
async function usableJwks(response: Response): Promise<Response | undefined> {
  if (response.status !== 200) {
    await response.body?.cancel().catch(() => {});
    return undefined;
  }
  const text = await response.text();
  try {
    const parsed = JSON.parse(text) as { keys?: unknown } | null;
    if (!Array.isArray(parsed?.keys)) return undefined;
  } catch {
    return undefined;
  }
  // The body was read (guardedFetch holds it whole already): jose reads this copy.
  return new Response(text, { status: 200, headers: response.headers });
}

/**
 * The JWKS fetch of one key set, which after a failure (unreachable, refused, slow, not
 * 200, not a key set) sends nothing for `cooldownMs`: jose gets the failure again (the
 * same error, or a 503 answer) and answers 503, as for the failure. Only fetches wait:
 * a token whose key the set already holds is verified meanwhile.
 */
export function jwksFetchCoolingDown(
  send: JwksFetch,
  cooldownMs: number,
  nowMs: () => number,
): JwksFetch {
  let failed: { error?: unknown; until: number } | undefined;
  return async (url, init) => {
    if (failed !== undefined && coolingDown(failed.until, nowMs(), cooldownMs)) {
      if ('error' in failed) throw failed.error;
      return COOLING_DOWN();
    }
    failed = undefined;
    let response: Response;
    try {
      response = await send(url, init);
    } catch (error) {
      failed = { error, until: nowMs() + cooldownMs };
      throw error;
    }
    const usable = await usableJwks(response);
    if (usable !== undefined) return usable;
    failed = { until: nowMs() + cooldownMs };
    return COOLING_DOWN();
  };
}

class KeyConfigError extends Error {}

async function importStaticKey(material: string, alg: string): Promise<CryptoKey | Uint8Array> {
  if (alg.startsWith('HS')) {
    // The operator refuses such a Secret; a record made before that rule lands here.
    const weak = weakHmacSecret(alg, material);
    if (weak !== undefined) throw new KeyConfigError(weak);
    return new TextEncoder().encode(material);
  }
  const text = material.trim();
  try {
    if (text.startsWith('-----BEGIN PUBLIC KEY-----')) return await importSPKI(text, alg);
    if (text.startsWith('-----BEGIN CERTIFICATE-----')) return await importX509(text, alg);
    if (text.startsWith('{')) {
      const jwk = JSON.parse(text) as JWK;
      if (jwk.kty === 'oct')
        throw new KeyConfigError('a symmetric JWK for an asymmetric algorithm');
      return await importJWK(jwk, alg);
    }
  } catch (error) {
    throw new KeyConfigError(error instanceof Error ? error.message : String(error));
  }
  throw new KeyConfigError('the key is neither a PEM public key, a certificate nor a JWK');
}

/**
 * Verifies JWTs for routes. The JWKS getter or imported key of a route is kept with its
 * route record (the route table keeps one record object per route version, and makes
 * a new one when the spec or the key material changes), so it goes with the record.
 */
export class JwtVerifier {
  readonly #options: JwtVerifierOptions;
  readonly #guard: () => OutboundGuard;
  readonly #refusals: RefusalReporter;
  readonly #keys = new WeakMap<
    RouteRecord,
    { config: TokenConfigInput; key: Promise<VerificationKey> }
  >();

  constructor(options: JwtVerifierOptions = {}) {
    this.#options = options;
    this.#guard = lazyGuard(options.outbound);
    this.#refusals = new RefusalReporter(options.onOutboundRefused);
  }

  #keyFor(route: RouteRecord, config: TokenConfigInput): Promise<VerificationKey> {
    const cached = this.#keys.get(route);
    if (cached?.config === config) return cached.key;
    const key = this.#loadKey(route, config, route.credentials.jwtKey);
    this.#keys.set(route, { config, key });
    // A failed import is not kept: the next request retries.
    key.catch(() => {
      if (this.#keys.get(route)?.key === key) this.#keys.delete(route);
    });
    return key;
  }

  async #loadKey(
    route: RouteRecord,
    config: TokenConfigInput,
    material: string | undefined,
  ): Promise<VerificationKey> {
    if (config.jwksUrl) {
      const timeoutMs = this.#options.jwksTimeoutMs ?? 5000;
      // The scope is looked up at every fetch (a cached one may have been closed since).
      const namespace = route.namespace;
      const now = this.#options.now;
      const nowMs = now ? () => now().getTime() : Date.now;
      const send = jwksFetchCoolingDown(
        guardedFetch(() => scopeFor(this.#guard(), namespace), timeoutMs),
        this.#options.jwksFailureCooldownMs ?? JWKS_FAILURE_COOLDOWN_MS,
        nowMs,
      );
      const onStale = this.#options.onJwksStale;
      const lastGood = new LastGoodJwks(
        this.#options.jwksMaxStaleMs ?? JWKS_MAX_STALE_MS,
        nowMs,
        onStale ? (use) => onStale(route, use) : undefined,
      );
      const remote = createRemoteJWKSet(new URL(config.jwksUrl), {
        timeoutDuration: timeoutMs,
        cooldownDuration: this.#options.jwksCooldownMs ?? 30_000,
        cacheMaxAge: this.#options.jwksMaxAgeMs ?? JWKS_MAX_AGE_MS,
        [customFetch]: lastGood.wrap(send),
      });
      // A set handed over for a failed refresh is fresh to jose for another cache age:
      // past its bound it is fetched again (within the cooldown) before any use.
      const getKey: JWTVerifyGetKey = async (header, token) => {
        if (lastGood.expired()) await remote.reload();
        try {
          return await remote(header, token);
        } catch (error) {
          if (error instanceof joseErrors.JWKSNoMatchingKey && lastGood.servingStale) {
            throw JWKS_UNAVAILABLE();
          }
          throw error;
        }
      };
      return getKey;
    }
    const [alg, ...more] = config.algorithms;
    if (material === undefined || alg === undefined || more.length > 0) {
      throw new KeyConfigError('a static key needs the key material and exactly one algorithm');
    }
    return importStaticKey(material, alg);
  }

  /** Verifies `token` for `route`; resolves with its payload or throws a 401/503 HttpProblem. */
  async verify(route: RouteRecord, config: TokenConfigInput, token: string): Promise<JWTPayload> {
    let key: VerificationKey;
    try {
      key = await this.#keyFor(route, config);
    } catch {
      throw authUnavailable('The token verification key of this endpoint is not usable.');
    }
    const options: JWTVerifyOptions = {
      algorithms: config.algorithms.filter((a) => a.toLowerCase() !== 'none'),
      issuer: config.issuer,
      audience: config.audiences,
      clockTolerance: config.clockToleranceSeconds ?? 30,
      requiredClaims: ['exp'],
      ...(config.requiredType ? { typ: config.requiredType } : {}),
      ...(this.#options.now ? { currentDate: this.#options.now() } : {}),
    };
    try {
      const { payload } =
        typeof key === 'function'
          ? await jwtVerify(token, key, options)
          : await jwtVerify(token, key, options);
      return payload;
    } catch (error) {
      if (this.#refusals.check(route, 'jwks', error)) throw JWKS_UNAVAILABLE();
      throw verificationProblem(error);
    }
  }
}

/** The config as it comes from the spec (defaults may be absent on hand-built records). */
export type TokenConfigInput = Omit<
  TokenVerificationConfig,
  'clockToleranceSeconds' | 'algorithms'
> & {
  algorithms: readonly string[];
  clockToleranceSeconds?: number;
};

export const defaultJwtVerifier = new JwtVerifier();

/** Bearer authentication: verifies the JWT and names its consumer. */
export async function authenticateBearer(
  route: RouteRecord,
  headers: HeaderMap,
  verifier: JwtVerifier = defaultJwtVerifier,
): Promise<{ consumer?: string }> {
  const config = route.spec.auth?.bearer;
  if (!config) throw new HttpProblem('HG_ERR_INTERNAL', 'Bearer authentication is not configured.');
  const token = bearerToken(headers);
  const payload = await verifier.verify(route, config, token);
  const consumer = consumerOf(payload);
  return consumer === undefined ? {} : { consumer };
}
