// Authentication of a webhook request, dispatched on route.spec.auth.method.
//
//   none   → {}                         (no credentials asked for)
//   apiKey → { consumer }               (api-key.ts)
//   bearer → { consumer? }              (jwt.ts)
//   oauth2 → { consumer? } + scopes     (oauth2.ts)
//   signature → {} here: a signature covers the body, so it is checked once the body is
//               read (signature/verify.ts, called by the webhook routes' body parser);
//               its headers are checked before (the guards: SignatureVerifier.checkHeaders)
//
// Failures are HttpProblems: 401 credentials-missing / credentials-invalid (with
// WWW-Authenticate), 403 insufficient-scope, 503 auth-unavailable.
import { HttpProblem } from '../../../errors.ts';
import type { RouteRecord } from '../../../../api/records/records.ts';
import type { HeaderMap } from '../headers.ts';
import { apiKeyHeaderName, authenticateApiKey } from './api-key.ts';
import {
  authenticateBearer,
  defaultJwtVerifier,
  JwtVerifier,
  type JwtVerifierOptions,
} from './jwt.ts';
import { defaultOAuth2Verifier, OAuth2Verifier } from './oauth2.ts';
import type { AuthOutboundOptions } from './outbound-fetch.ts';
import { SignatureVerifier } from './signature/verify.ts';

export interface AuthResult {
  /** Who called: API key consumer id, or the token's sub / client_id / azp. */
  consumer?: string;
}

/** Synchronous for none and API keys (no promise on the hot path), a promise for tokens. */
export type Authenticator = (
  route: RouteRecord,
  headers: HeaderMap,
) => AuthResult | Promise<AuthResult>;

/**
 * An authenticator with its own verifiers (its own JWKS and introspection caches). With
 * `outbound` (the process's outbound guard) or `onOutboundRefused`, the verifiers not
 * given are made with them; otherwise the process-wide ones (public https only).
 */
export function createAuthenticator(
  verifiers: {
    jwt?: JwtVerifier;
    oauth2?: OAuth2Verifier;
    onJwksStale?: JwtVerifierOptions['onJwksStale'];
  } & AuthOutboundOptions = {},
): Authenticator {
  const outbound: AuthOutboundOptions = {
    ...(verifiers.outbound ? { outbound: verifiers.outbound } : {}),
    ...(verifiers.onOutboundRefused ? { onOutboundRefused: verifiers.onOutboundRefused } : {}),
  };
  const stale = verifiers.onJwksStale ? { onJwksStale: verifiers.onJwksStale } : {};
  const own = Object.keys(outbound).length > 0 || verifiers.onJwksStale !== undefined;
  const jwt =
    verifiers.jwt ?? (own ? new JwtVerifier({ ...outbound, ...stale }) : defaultJwtVerifier);
  const oauth2 =
    verifiers.oauth2 ??
    (verifiers.jwt || own ? new OAuth2Verifier({ jwt, ...outbound }) : defaultOAuth2Verifier);
  return (route, headers) => {
    const method = route.spec.auth?.method ?? 'none';
    switch (method) {
      case 'none':
        return {};
      case 'apiKey':
        if (!route.spec.auth?.apiKey) {
          throw new HttpProblem('HG_ERR_INTERNAL', 'API key authentication is not configured.');
        }
        return authenticateApiKey(route, headers);
      case 'bearer':
        return authenticateBearer(route, headers, jwt);
      case 'oauth2':
        return oauth2.authenticate(route, headers);
      case 'signature':
        return {};
      default:
        throw new HttpProblem('HG_ERR_INTERNAL', 'Unknown authentication method.');
    }
  };
}

/**
 * The request header that carries the route's credentials — what a CORS preflight must
 * grant: the API key header, `Authorization` for bearer and oauth2, none without auth.
 */
export function authHeaderNameFor(route: RouteRecord): string | undefined {
  switch (route.spec.auth?.method ?? 'none') {
    case 'apiKey':
      return apiKeyHeaderName(route);
    case 'bearer':
    case 'oauth2':
      return 'Authorization';
    case 'signature':
      return SignatureVerifier.headerOf(route);
    default:
      return undefined;
  }
}

const defaultAuthenticator = createAuthenticator();

/** Authenticates a request for a route with the process-wide verifiers. */
export async function authenticate(route: RouteRecord, headers: HeaderMap): Promise<AuthResult> {
  return defaultAuthenticator(route, headers);
}

export { type HeaderMap } from '../headers.ts';
