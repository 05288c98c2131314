// Bearer JWT verification (spec: Authentication 3; acceptance rule G3; RFC 8725, RFC 6750).
//
// - The algorithm allow-list comes from the route (`algorithms`), never from the token
//   header; `none` is never accepted (jose refuses it). A static key (keySecretRef)
//   allows exactly one algorithm, so an RS256 key can never be used as an HS256 secret.
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
import { HttpProblem } from '../../../errors.ts';
import type { RouteRecord } from '../../../../api/records/records.ts';
import { headerValue, type HeaderMap } from '../headers.ts';
import {
  RefusalReporter,
  guardedFetch,
  lazyGuard,
  scopeFor,
  type AuthOutboundOptions,
} from './outbound-fetch.ts';
import type { OutboundGuard } from '../../../engine/outbound/guard.ts';

export const REALM = 'hookgate';

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
  /** The clock (tests). */
  now?: () => Date;
}

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

class KeyConfigError extends Error {}

async function importStaticKey(material: string, alg: string): Promise<CryptoKey | Uint8Array> {
  if (alg.startsWith('HS')) return new TextEncoder().encode(material);
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
      return createRemoteJWKSet(new URL(config.jwksUrl), {
        timeoutDuration: timeoutMs,
        cooldownDuration: this.#options.jwksCooldownMs ?? 30_000,
        [customFetch]: guardedFetch(() => scopeFor(this.#guard(), namespace), timeoutMs),
      });
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
