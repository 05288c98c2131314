// API key authentication (spec: Authentication 2; acceptance rule G2).
//
// Keys are stored as SHA-256 hex digests (ResolvedCredentials.apiKeys). The presented
// key is hashed and compared with every stored digest using crypto.timingSafeEqual on
// two 32-byte buffers: the digests always have equal length, so a presented key of any
// length is a clean 401 (timingSafeEqual would throw on unequal lengths), and the time
// taken does not depend on how much of a key matched.
import { createHash, timingSafeEqual } from 'node:crypto';
import { HttpProblem } from '../../../errors.ts';
import type { RouteRecord } from '../../../stores/ports.ts';
import { headerValue, type HeaderMap } from '../headers.ts';

export const DEFAULT_API_KEY_HEADER = 'X-API-Key';

const DIGEST_HEX = /^[0-9a-f]{64}$/i;

/** The header the route expects its key in. */
export function apiKeyHeaderName(route: RouteRecord): string {
  return route.spec.auth?.apiKey?.header ?? DEFAULT_API_KEY_HEADER;
}

/** The WWW-Authenticate challenge sent with every API key 401. */
export function apiKeyChallenge(headerName: string): string {
  return `ApiKey header="${headerName}"`;
}

/**
 * Checks the API key of a request against the route's stored digests.
 * Returns the consumer id the key belongs to; throws a 401 HttpProblem otherwise.
 */
export function authenticateApiKey(route: RouteRecord, headers: HeaderMap): { consumer: string } {
  const headerName = apiKeyHeaderName(route);
  const challenge = { headers: { 'WWW-Authenticate': apiKeyChallenge(headerName) } };
  const presented = headerValue(headers, headerName);
  if (presented === undefined || presented.trim() === '') {
    throw new HttpProblem(
      'HG_ERR_CREDENTIALS_MISSING',
      `Send the API key in the ${headerName} header.`,
      challenge,
    );
  }
  const digest = createHash('sha256').update(presented, 'utf8').digest();
  let consumer: string | undefined;
  // No early exit: every stored digest is compared, whichever one matches.
  for (const entry of route.credentials.apiKeys ?? []) {
    if (!DIGEST_HEX.test(entry.sha256)) continue; // a malformed stored digest never matches
    const stored = Buffer.from(entry.sha256, 'hex');
    if (timingSafeEqual(stored, digest) && consumer === undefined) consumer = entry.consumer;
  }
  if (consumer === undefined) {
    throw new HttpProblem(
      'HG_ERR_CREDENTIALS_INVALID',
      `The API key in the ${headerName} header is not valid.`,
      challenge,
    );
  }
  return { consumer };
}
