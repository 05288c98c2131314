// Verification of signed deliveries (auth.method: signature), over the exact raw body
// bytes, before anything parses them. Checks, in order, each with its own 401
// (problems.ts):
//
//   1. the headers are there           signature-missing
//   2. they have the scheme's format   signature-malformed
//   3. the signed timestamp is within toleranceSeconds of our clock
//                                      signature-timestamp-outside-tolerance
//   4. an HMAC of the signed bytes with one of the active secrets equals one of the
//      signatures                      signature-mismatch
//   5. the delivery was not accepted before (replay store)
//                                      signature-replayed
//
// Steps 1 to 3 need the headers only: checkHeaders() runs them before the body is read
// (the request path's onRequest), so a delivery without a usable signature header, or
// with a stale timestamp, is refused without its body being read; verify() runs them
// again once the body is there (the timestamp against the clock of then). Step 3 comes
// before any HMAC is computed; step 5 after the signature is valid, so nobody without a
// secret can fill the replay store. Every secret is compared with
// every candidate by crypto.timingSafeEqual on equal-length buffers (the candidate's
// length is checked against the digest's in step 2, and a length is no secret), with no
// early exit: the time taken does not depend on which secret or how much of one matched.
import { hash, timingSafeEqual } from 'node:crypto';
import { HttpProblem, StoreUnavailableError } from '../../../../errors.ts';
import type { RouteRecord } from '../../../../../api/records/records.ts';
import { headerValue, type HeaderMap } from '../../headers.ts';
import {
  DIGEST_BYTES,
  MAX_CANDIDATES,
  decodeSignature,
  schemeOf,
  signatureHeader,
  signedContentDigest,
  signedDigest,
  type Scheme,
} from './schemes.ts';
import { malformed, mismatch, missing, outsideTolerance, replayed } from './problems.ts';
import type { ReplayStore } from './replay.ts';

/** What a verified delivery tells the request path. */
export interface SignatureCheck {
  /** The Secret key whose secret signed the delivery (the consumer, as for API keys). */
  consumer: string;
  /** Frees the replay claim, when one was taken (the delivery was then refused). */
  release?: () => Promise<void>;
  /**
   * Set instead of a claim when verify() was asked to defer the claim of a delivery
   * whose replay key is its id: the request path keys idempotency on the id and takes
   * the claim itself, once the idempotency claim says the delivery is new.
   */
  delivery?: DeliveryReplay;
}

/** A delivery whose replay claim (by its id) was deferred to the request path. */
export interface DeliveryReplay {
  /** The scheme's name: the preset (`github`, `shopify`, `standardWebhooks`, `generic`). */
  scheme: string;
  /** The delivery id, as sent (signed, or the sender's unsigned redelivery id). */
  id: string;
  /**
   * Takes the replay claim: its release when it was free, undefined when an earlier
   * delivery holds it. A store failure throws 503 store-unavailable (fail closed).
   */
  claim(): Promise<(() => Promise<void>) | undefined>;
  /**
   * Frees the id's replay claim, whichever request took it: a delivery whose run failed
   * under its implicit key is to run again on the sender's retry (claims.ts).
   */
  release(): Promise<void>;
  /** The 401 signature-replayed of this delivery (`otherBody`: the id came with another body). */
  replayed(otherBody?: boolean): HttpProblem;
}

export interface VerifyOptions {
  /**
   * Do not claim a delivery whose replay key is its id: hand it back as
   * `SignatureCheck.delivery` (the request path has an idempotency store).
   */
  deferIdClaim?: boolean;
}

export interface SignatureVerifierOptions {
  /** Where accepted deliveries are remembered; without one, replays are not checked. */
  replay?: ReplayStore;
  /** The clock (ms since the epoch). */
  now?: () => number;
}

interface SigningKey {
  name: string;
  key: Buffer;
}

interface Compiled {
  scheme: Scheme;
  keys: SigningKey[];
  toleranceSeconds: number;
  rejectReplays: boolean;
}

const TIMESTAMP = /^[0-9]{1,12}$/;

/**
 * The scheme and HMAC keys of a route, made once per route record: records are
 * replaced, never edited, when the trigger or its Secret changes.
 */
const compiledRoutes = new WeakMap<RouteRecord, Compiled>();

function compile(route: RouteRecord): Compiled {
  let compiled = compiledRoutes.get(route);
  if (compiled) return compiled;
  const signature = route.spec.auth?.signature;
  if (!signature) {
    throw new HttpProblem('HG_ERR_INTERNAL', 'Signature verification is not configured.');
  }
  const scheme = schemeOf(signature);
  const keys: SigningKey[] = [];
  for (const { key: name, secret } of route.credentials.signingSecrets ?? []) {
    try {
      keys.push({ name, key: scheme.key(secret) });
    } catch {
      // The operator refuses such a Secret (SecretInvalid); a stale record never matches.
    }
  }
  compiled = {
    scheme,
    keys,
    toleranceSeconds: signature.toleranceSeconds ?? 300,
    rejectReplays: signature.rejectReplays ?? true,
  };
  compiledRoutes.set(route, compiled);
  return compiled;
}

/** A header's value, or undefined when absent or blank. */
function present(headers: HeaderMap, name: string): string | undefined {
  const value = headerValue(headers, name);
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

export class SignatureVerifier {
  readonly #replay: ReplayStore | undefined;
  readonly #now: () => number;

  constructor(options: SignatureVerifierOptions = {}) {
    this.#replay = options.replay;
    this.#now = options.now ?? Date.now;
  }

  /** The header a route's deliveries carry their signature in. */
  static headerOf(route: RouteRecord): string | undefined {
    const signature = route.spec.auth?.signature;
    return signature ? signatureHeader(signature) : undefined;
  }

  /**
   * Steps 1-3, on the headers alone (before the body is read): throws the 401 of the
   * first check that fails. Synchronous, no I/O, no HMAC.
   */
  checkHeaders(route: RouteRecord, headers: HeaderMap): void {
    const { scheme, toleranceSeconds } = compile(route);
    const delivery = readDelivery(scheme, headers);
    if (scheme.timestamped) {
      checkTimestamp(scheme, delivery.timestamp, this.#now(), toleranceSeconds);
    }
  }

  /** Verifies a delivery; throws the 401 of the first check that fails. */
  async verify(
    route: RouteRecord,
    headers: HeaderMap,
    body: Buffer,
    options: VerifyOptions = {},
  ): Promise<SignatureCheck> {
    const compiled = compile(route);
    const { scheme } = compiled;
    const remember = compiled.rejectReplays && this.#replay !== undefined;
    const checked = this.#check(compiled, headers, body, remember);
    if (!remember || this.#replay === undefined || checked.token === undefined) {
      return { consumer: checked.consumer };
    }
    const replay = this.#replay;
    const token = checked.token;
    const key = hash('sha256', `${route.key}\n${token}`, 'hex');
    const claim = async (): Promise<(() => Promise<void>) | undefined> => {
      let claimed: boolean;
      try {
        claimed = await replay.claim(key, checked.ttlMs);
      } catch (error) {
        // Fail closed (503 store-unavailable): an unchecked replay could run the workflow twice.
        if (error instanceof StoreUnavailableError) throw error;
        throw new StoreUnavailableError('the replay check of signed deliveries failed', {
          cause: error,
        });
      }
      return claimed ? () => replay.release(key) : undefined;
    };
    const byId = token.startsWith('id:');
    if (byId && options.deferIdClaim === true) {
      const delivery: DeliveryReplay = {
        scheme: route.spec.auth?.signature?.preset ?? 'generic',
        id: token.slice('id:'.length),
        claim,
        release: () => replay.release(key),
        replayed: (otherBody = false) => replayed(scheme.header, true, otherBody),
      };
      return { consumer: checked.consumer, delivery };
    }
    const release = await claim();
    if (release === undefined) throw replayed(scheme.header, byId);
    return { consumer: checked.consumer, release };
  }

  /** Steps 1-4: synchronous, no I/O. The replay key only when `replayKey` (it hashes the body). */
  #check(
    compiled: Compiled,
    headers: HeaderMap,
    body: Buffer,
    replayKey: boolean,
  ): { consumer: string; token?: string; ttlMs: number } {
    const { scheme, toleranceSeconds } = compiled;
    const delivery = readDelivery(scheme, headers);
    const nowMs = this.#now();
    let ttlMs = toleranceSeconds * 1000;
    if (scheme.timestamped) {
      const timestamp = checkTimestamp(scheme, delivery.timestamp, nowMs, toleranceSeconds);
      // Remembered until the timestamp leaves the window (and a second more).
      ttlMs = Math.max(1000, (timestamp + toleranceSeconds + 1) * 1000 - nowMs);
    }
    const consumer = match(compiled, delivery, body);
    const token = replayKey ? replayToken(scheme, delivery, body) : undefined;
    return token === undefined ? { consumer, ttlMs } : { consumer, token, ttlMs };
  }
}

/** The parts of a delivery the scheme reads from its headers. */
interface Delivery {
  candidates: { bytes: Buffer }[];
  timestamp: string | undefined;
  id: string | undefined;
}

/** Steps 1 and 2: every header the scheme needs is there, in the scheme's format. */
function readDelivery(scheme: Scheme, headers: HeaderMap): Delivery {
  const header = scheme.header;
  const value = present(headers, header);
  if (value === undefined) throw missing(header, header);
  let timestamp: string | undefined;
  if (scheme.timestampHeader !== undefined) {
    timestamp = present(headers, scheme.timestampHeader);
    if (timestamp === undefined) throw missing(header, scheme.timestampHeader);
  }
  const id = scheme.idHeader === undefined ? undefined : present(headers, scheme.idHeader);
  if (scheme.idSigned && id === undefined) throw missing(header, scheme.idHeader as string);
  const parsed = scheme.parse(value);
  if (parsed.signatures.length > MAX_CANDIDATES) {
    throw malformed(header, `The ${header} header has more than ${MAX_CANDIDATES} signatures.`);
  }
  const bytes = DIGEST_BYTES[scheme.algorithm];
  const candidates: Delivery['candidates'] = [];
  for (const text of parsed.signatures) {
    const decoded = decodeSignature(text, scheme.encoding, bytes);
    if (decoded) candidates.push({ bytes: decoded });
  }
  if (candidates.length === 0) {
    throw malformed(
      header,
      `The ${header} header holds no ${scheme.encoding} HMAC-${scheme.algorithm.toUpperCase()} signature (${bytes} bytes).`,
    );
  }
  return { candidates, timestamp: timestamp ?? parsed.timestamp, id };
}

/** Step 3: the signed timestamp (Unix seconds) within the tolerance, either way. */
function checkTimestamp(
  scheme: Scheme,
  text: string | undefined,
  nowMs: number,
  toleranceSeconds: number,
): number {
  if (text === undefined || !TIMESTAMP.test(text)) {
    throw malformed(scheme.header, 'The signed timestamp is not a Unix time in seconds.');
  }
  const timestamp = Number(text);
  if (Math.abs(nowMs / 1000 - timestamp) > toleranceSeconds) {
    throw outsideTolerance(scheme.header, toleranceSeconds);
  }
  return timestamp;
}

/** Step 4: every key against every candidate, no early exit. The consumer that matched. */
function match(compiled: Compiled, delivery: Delivery, body: Buffer): string {
  const { scheme } = compiled;
  let matched: string | undefined;
  for (const { name, key } of compiled.keys) {
    const digest = signedDigest(scheme, key, delivery, body);
    for (const candidate of delivery.candidates) {
      if (timingSafeEqual(digest, candidate.bytes) && matched === undefined) matched = name;
    }
  }
  if (matched === undefined) throw mismatch(scheme.header);
  return matched;
}

/**
 * The replay key: a signed id; else, with a signed timestamp, the signed bytes
 * themselves (their SHA-256: the same timestamp and body are the same delivery);
 * else an unsigned delivery id (it spots redeliveries, not forgeries); else none.
 *
 * Not the signature that matched: a header may carry several (Stripe's v1 entries, one
 * per secret while the sender rotates), and with both secrets active here the copy
 * that keeps only the other one, or writes it in upper-case hex, or base64 with other
 * unused trailing bits, was a new key for the same delivery.
 */
function replayToken(scheme: Scheme, delivery: Delivery, body: Buffer): string | undefined {
  const { id } = delivery;
  if (scheme.idSigned && id !== undefined) return `id:${id}`;
  if (scheme.timestamped)
    return `signed:${signedContentDigest(scheme, delivery, body).toString('hex')}`;
  return id === undefined ? undefined : `id:${id}`;
}
