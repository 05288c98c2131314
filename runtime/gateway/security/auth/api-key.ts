// API key authentication (spec: Authentication 2; acceptance rule G2).
//
// Keys are stored as SHA-256 hex digests (ResolvedCredentials.apiKeys). The presented
// key is hashed and compared with every stored digest using crypto.timingSafeEqual on
// two 32-byte buffers: the digests always have equal length, so a presented key of any
// length is a clean 401 (timingSafeEqual would throw on unequal lengths), and the time
// taken does not depend on how much of a key matched.
//
// Hot path: the one-shot crypto.hash with hex output, decoded into a pooled Buffer (a
// Hash object, or crypto.hash's binary output in a fresh ArrayBuffer, costs several
// times more per request), and the stored digests are decoded once per credentials list.
import { hash, timingSafeEqual } from 'node:crypto';
import { HttpProblem } from '../../../errors.ts';
import type { RouteRecord } from '../../../../api/records/records.ts';
import { headerValue, type HeaderMap } from '../headers.ts';

export const DEFAULT_API_KEY_HEADER = 'X-API-Key';

const DIGEST_HEX = /^[0-9a-f]{64}$/i;

interface StoredKey {
  consumer: string;
  digest: Buffer;
}

/**
 * The stored digests of a credentials list, decoded once. Keyed by the list itself:
 * route records are replaced, never edited, when their Secret changes.
 */
const decoded = new WeakMap<readonly { consumer: string; sha256: string }[], StoredKey[]>();

function storedKeys(route: RouteRecord): StoredKey[] {
  const entries = route.credentials.apiKeys;
  if (!entries) return [];
  let keys = decoded.get(entries);
  if (!keys) {
    keys = entries
      .filter((entry) => DIGEST_HEX.test(entry.sha256)) // a malformed stored digest never matches
      .map((entry) => ({
        consumer: entry.consumer,
        digest: Buffer.from(entry.sha256, 'hex'),
      }));
    decoded.set(entries, keys);
  }
  return keys;
}

/** The header the route expects its key in. */
export function apiKeyHeaderName(route: RouteRecord): string {
  return route.spec.auth?.apiKey?.header ?? DEFAULT_API_KEY_HEADER;
}

/** The WWW-Authenticate challenge sent with every API key 401. */
export function apiKeyChallenge(headerName: string): string {
  return `ApiKey header="${headerName}"`;
}

function challengeHeaders(headerName: string): { headers: Record<string, string> } {
  return { headers: { 'WWW-Authenticate': apiKeyChallenge(headerName) } };
}

/**
 * Checks the API key of a request against the route's stored digests.
 * Returns the consumer id the key belongs to; throws a 401 HttpProblem otherwise.
 */
export function authenticateApiKey(route: RouteRecord, headers: HeaderMap): { consumer: string } {
  const headerName = apiKeyHeaderName(route);
  const presented = headerValue(headers, headerName);
  if (presented === undefined || presented.trim() === '') {
    throw new HttpProblem(
      'HG_ERR_CREDENTIALS_MISSING',
      `Send the API key in the ${headerName} header.`,
      challengeHeaders(headerName),
    );
  }
  const digest = Buffer.from(hash('sha256', presented, 'hex'), 'hex');
  let consumer: string | undefined;
  // No early exit: every stored digest is compared, whichever one matches.
  for (const stored of storedKeys(route)) {
    if (timingSafeEqual(stored.digest, digest) && consumer === undefined)
      consumer = stored.consumer;
  }
  if (consumer === undefined) {
    throw new HttpProblem(
      'HG_ERR_CREDENTIALS_INVALID',
      `The API key in the ${headerName} header is not valid.`,
      challengeHeaders(headerName),
    );
  }
  return { consumer };
}
