// Idempotency-Key on webhook requests (IETF httpapi idempotency-key draft):
//   same key + same request   → the first answer again (Idempotent-Replayed: true), no new run:
//                                its status, body and headers (those of the trigger and the
//                                respond node too; not the per-request ones)
//   same key + other request  → 422 idempotency-key-reused
//   same key, first still busy → 409 idempotency-in-progress (for the endpoint's
//                                timeout and a margin at most; then it may run again)
// Keys are scoped per endpoint and consumer, fingerprinted over method, path+query and the raw body,
// and kept for a window (24 h by default).
//
// A signed delivery whose replay key is its id (GitHub, Shopify, Standard Webhooks,
// generic with an id), sent without an Idempotency-Key, has that id as its implicit key
// (deliveryKey): the sender's retry of the same delivery gets the first answer, waits
// for or resumes the same execution, and never runs it twice. The delivery's replay
// claim (verify.ts) is taken after the key's, only by a request that starts something
// new: it still refuses (401 signature-replayed) a delivery accepted within the
// tolerance window that the key does not know (evicted, or accepted by a gateway from
// before implicit keys). The same id with another body is refused as a replay.
import { createHash, randomUUID } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { HttpProblem } from '../../errors.ts';
import {
  parseIdempotencyKey,
  requestFingerprint,
  type IdempotencyRecord,
  type IdempotencyStore,
} from './store.ts';
import type { WebhookContext } from '../context.ts';
import { parseDuration } from '../../../api/v1alpha1/common.ts';
import { settableResponseHeader } from '../../../api/v1alpha1/index.ts';
import { setAuthorHeader } from '../response-headers.ts';
import { randomExecutionToken } from '../execution-links.ts';

export const IDEMPOTENCY_HEADER = 'idempotency-key';
export const DEFAULT_IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;
/**
 * Kept with every stored answer (a handle given for a stream or a large answer too): its
 * type, its execution's link and the correlation id the caller was first answered with.
 */
const REPLAYED_HEADERS = ['content-type', 'location', 'x-correlation-id'];
/**
 * Set for each request, never taken from a stored answer: the replay's own request id
 * and time, its own rate-limit count, its own `Idempotent-Replayed`; the gateway's
 * `nosniff` (set on every answer). `Date` and the framing headers are Node's, written
 * with each answer; cookies, CORS and origin-wide headers are never an answer's
 * (settableResponseHeader refuses them), so none is stored.
 */
const PER_REQUEST_HEADERS: ReadonlySet<string> = new Set([
  'x-request-id',
  'x-timestamp',
  'ratelimit',
  'ratelimit-limit',
  'ratelimit-remaining',
  'ratelimit-reset',
  'ratelimit-policy',
  'idempotent-replayed',
  'x-content-type-options',
]);
/**
 * Bytes of header names and values kept with a stored answer at most (the three above
 * first): a trigger's and a respond node's headers may each be 4 KiB, 64 of them. Headers
 * past it are left out of the replay (the rest of the answer is kept).
 */
export const MAX_REPLAYED_HEADER_BYTES = 8 * 1024;

export interface IdempotencyOptions {
  store: IdempotencyStore;
  windowMs?: number;
  /**
   * Answers larger than this (bytes) are not kept: a retry gets a handle on the same
   * execution instead, as for an SSE stream. Default 64 KiB.
   */
  maxAnswerBytes?: number;
}

/** Default largest answer kept for replay (64 KiB, as stored bodies). */
export const DEFAULT_IDEMPOTENT_ANSWER_BYTES = 64 * 1024;

/**
 * How long a claim stays in progress past the endpoint's timeout: every response mode
 * answers by then (a waiting one with 408), which completes or gives back the claim.
 * One whose answer was lost (the store took the claim and answered too late, the
 * process died) then lets the same request in again, instead of answering 409 for the
 * key's whole window.
 */
export const CLAIM_LEASE_MARGIN_MS = 5_000;

/**
 * Where a key is kept: per endpoint, and per consumer when the endpoint knows who calls
 * (API key, JWT, OAuth 2.0): two consumers sending the same key (an order id) must not
 * get each other's answers, nor learn that the other used it. `<namespace>/<name>` has
 * no `#`, so the two forms never meet.
 */
function claimKey(ctx: WebhookContext, key: string): string {
  const route = ctx.match.route.key;
  const consumer = ctx.consumer;
  return consumer === undefined
    ? `${route}:${key}`
    : `${route}#${encodeURIComponent(consumer)}:${key}`;
}

/** Ids longer than this (once percent-encoded) are kept by their SHA-256. */
const MAX_DELIVERY_ID_CHARS = 200;

/**
 * The implicit key of a signed delivery: `signature:<preset>:<id, percent-encoded>`
 * (`signature:<preset>#<sha256 hex of the id>` for a longer one), kept per endpoint but
 * not per consumer (every signing secret of a route is the same sender's, rotated), after
 * `@`: a route key has no `@`, and caller-chosen keys follow `:` or `#`, so the forms never
 * meet.
 */
export function deliveryKey(delivery: { scheme: string; id: string }): string {
  const id = encodeURIComponent(delivery.id);
  return id.length <= MAX_DELIVERY_ID_CHARS
    ? `signature:${delivery.scheme}:${id}`
    : `signature:${delivery.scheme}#${createHash('sha256').update(delivery.id).digest('hex')}`;
}

/**
 * Claims the request's key: its Idempotency-Key, else a signed delivery's id. Returns
 * true when the request should run; otherwise it has answered (replay) or thrown
 * (409/422/400, or 401 signature-replayed for a delivery).
 */
export async function claimIdempotencyKey(
  options: IdempotencyOptions,
  request: FastifyRequest,
  reply: FastifyReply,
  ctx: WebhookContext,
): Promise<boolean> {
  const header = request.headers[IDEMPOTENCY_HEADER];
  const delivery = ctx.signature?.delivery;
  let key: string;
  if (header !== undefined) {
    key = claimKey(ctx, parseIdempotencyKey(Array.isArray(header) ? header.join(',') : header));
  } else if (delivery !== undefined) {
    key = `${ctx.match.route.key}@${deliveryKey(delivery)}`;
  } else {
    return true;
  }
  const implicit = header === undefined;
  const fingerprint = requestFingerprint(request.method, request.url, ctx.rawBody);
  const windowMs = options.windowMs ?? DEFAULT_IDEMPOTENCY_WINDOW_MS;
  const leaseMs = parseDuration(ctx.match.route.spec.timeout) + CLAIM_LEASE_MARGIN_MS;
  // The execution this request will start, kept with the claim from the start: a claim
  // whose lease runs out before it is answered or given back (the process died after it
  // asked the engine, or the engine answered that late) hands it to the retry, which
  // starts this same id rather than a second execution.
  const planned = { executionId: randomUUID(), token: randomExecutionToken() };
  const result = await options.store.begin(key, fingerprint, windowMs, leaseMs, planned);
  switch (result.state) {
    case 'new':
      ctx.idempotencyClaim = { key, owner: result.owner };
      ctx.idempotencyWindowMs = windowMs;
      if (implicit) ctx.idempotencyImplicit = true;
      if (result.resume) {
        ctx.resume = result.resume;
        return true;
      }
      ctx.planned = planned;
      // A signed delivery's replay claim, deferred to here: taken by a request that
      // starts something new; a resumed one continues the execution its id started.
      if (delivery !== undefined) await claimDelivery(ctx, delivery);
      return true;
    case 'replay': {
      const record = result.record;
      if (record.executionId) ctx.executionId = record.executionId;
      reply.code(record.status);
      replayHeaders(reply, record.headers);
      reply.header('idempotent-replayed', 'true');
      await reply.send(record.body);
      return false;
    }
    case 'in-progress':
      throw new HttpProblem(
        'HG_ERR_IDEMPOTENCY_IN_PROGRESS',
        implicit
          ? 'A delivery with this id is still being processed'
          : 'A request with this Idempotency-Key is still being processed',
      );
    case 'mismatch':
      // A delivery id with another body is no retry of that delivery: a replay (of a
      // captured body under another id, when the sender does not sign its ids).
      if (implicit && delivery !== undefined) throw delivery.replayed(true);
      throw new HttpProblem(
        'HG_ERR_IDEMPOTENCY_KEY_REUSED',
        'This Idempotency-Key was used with a different request',
      );
  }
}

/**
 * Takes a signed delivery's replay claim once its key said it is new. Held by another
 * request: an accepted delivery the key does not know; refused as a replay (onError
 * gives the key back).
 */
async function claimDelivery(
  ctx: WebhookContext,
  delivery: NonNullable<NonNullable<WebhookContext['signature']>['delivery']>,
): Promise<void> {
  const release = await delivery.claim();
  if (release === undefined) throw delivery.replayed();
  (ctx.signature ??= {}).release = release;
}

/** onSend: store the answer of a request that owns its key, so a retry gets it again. */
export async function recordIdempotentAnswer(
  options: IdempotencyOptions,
  reply: FastifyReply,
  ctx: WebhookContext,
  payload: unknown,
): Promise<void> {
  const claim = ctx.idempotencyClaim;
  if (!claim) return;
  if (await givenBackUnanswered(options, reply, ctx, claim)) return;
  ctx.idempotencyClaim = undefined;
  let headers = storedHeaders(reply);
  let body: unknown = payload;
  const max = options.maxAnswerBytes ?? DEFAULT_IDEMPOTENT_ANSWER_BYTES;
  const size =
    typeof payload === 'string'
      ? Buffer.byteLength(payload)
      : Buffer.isBuffer(payload)
        ? payload.length
        : 0;
  if (
    size > max ||
    (typeof payload !== 'string' &&
      !Buffer.isBuffer(payload) &&
      payload !== undefined &&
      payload !== null)
  ) {
    // A stream (SSE), or an answer too large to keep: a retry gets a handle on the
    // same execution instead (the caller's links, with the execution's token), with the
    // headers every answer keeps, not the stream's.
    headers = baseHeaders(reply);
    headers['content-type'] = 'application/json; charset=utf-8';
    body = JSON.stringify({
      executionId: ctx.executionId,
      ...(ctx.executionLinks ? { links: ctx.executionLinks } : {}),
    });
  }
  const record: IdempotencyRecord = {
    status: reply.statusCode,
    headers,
    body: Buffer.isBuffer(body) ? body.toString('utf8') : (body ?? ''),
    ...(ctx.executionId ? { executionId: ctx.executionId } : {}),
  };
  // Not stored when the claim is no longer this request's (its lease ran out and a
  // retry holds it now): that retry's answer is the key's.
  await options.store.complete(claim.key, claim.owner, record);
}

/** The headers every stored answer keeps (REPLAYED_HEADERS), as the answer has them. */
function baseHeaders(reply: FastifyReply): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const name of REPLAYED_HEADERS) {
    const value = reply.getHeader(name);
    if (typeof value === 'string') headers[name] = value;
  }
  return headers;
}

/**
 * The answer's headers a replay sends again: REPLAYED_HEADERS, then every header a
 * trigger or a respond node may set (settableResponseHeader: its custom headers, the
 * respond node's, a Vary, a sandboxed Content-Security-Policy) except the per-request
 * ones, in the answer's order, within MAX_REPLAYED_HEADER_BYTES.
 */
function storedHeaders(reply: FastifyReply): Record<string, string> {
  const headers = baseHeaders(reply);
  let bytes = 0;
  for (const [name, value] of Object.entries(headers)) bytes += name.length + value.length;
  for (const [name, value] of Object.entries(reply.getHeaders())) {
    if (Object.hasOwn(headers, name) || PER_REQUEST_HEADERS.has(name)) continue;
    if (!settableResponseHeader(name, value)) continue;
    const size = name.length + value.length;
    if (bytes + size > MAX_REPLAYED_HEADER_BYTES) continue;
    headers[name] = value;
    bytes += size;
  }
  return headers;
}

/**
 * Sets a stored answer's headers on its replay: its Content-Type as stored (a value HTTP
 * can carry); every other one as a trigger's or a respond node's is (setAuthorHeader:
 * the rule again, Vary added to the replay's own, the policy sandboxed; Location and
 * X-Correlation-ID pass it), so an entry written by another version of the gateway, or
 * changed in the store, sets nothing the rule refuses. An entry stored before the other
 * headers were kept has the three: its replay is what it was.
 */
function replayHeaders(reply: FastifyReply, headers: Record<string, unknown>): void {
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (lower === 'content-type') {
      // Not a name a workflow may set, but a value HTTP can carry is checked alike.
      if (settableResponseHeader('x-replayed-type', value)) reply.header('content-type', value);
    } else if (!PER_REQUEST_HEADERS.has(lower)) {
      setAuthorHeader(reply, lower, value);
    }
  }
}

/**
 * An answer that is not the key's: the key is given back (true), and onSend stores
 * nothing.
 */
async function givenBackUnanswered(
  options: IdempotencyOptions,
  reply: FastifyReply,
  ctx: WebhookContext,
  claim: NonNullable<WebhookContext['idempotencyClaim']>,
): Promise<boolean> {
  // A waiting mode's timeout (408: the workflow keeps running) is no final answer: the
  // key is given back with the execution's hint, and the retry waits for (or gets the
  // end of) that same execution, as after a caller that left.
  // Under a delivery's implicit key, an execution found gone before its end reached
  // this gateway (503 execution-result-unavailable, response-modes.ts) is no final
  // answer either: the retry resumes that execution's id (its tombstone answers 202, a
  // lost one runs again).
  if (
    ctx.executionLinks !== undefined &&
    (ctx.problem === 'HG_ERR_REQUEST_TIMEOUT' ||
      (ctx.idempotencyImplicit === true && ctx.problem === 'HG_ERR_EXECUTION_RESULT_UNAVAILABLE'))
  ) {
    await releaseIdempotencyKey(options, ctx);
    return true;
  }
  // A delivery keyed by its id answered 5xx once its execution started (it failed, or
  // its workflow answered 5xx): the sender retries such a delivery so that it is
  // processed again, and a stored 5xx would answer every retry for the key's window. Not
  // kept: the id's replay claim is freed (whichever request of the delivery took it),
  // then the key, without a hint, and the retry runs the delivery again. An explicit
  // Idempotency-Key keeps its answer, 5xx too (its caller chose the key).
  if (
    ctx.idempotencyImplicit === true &&
    ctx.executionLinks !== undefined &&
    reply.statusCode >= 500
  ) {
    ctx.idempotencyClaim = undefined;
    // The key is given back even when the claim's release fails (Redis away): held, it
    // would answer the sender's retries 409 until its lease ended.
    try {
      await ctx.signature?.delivery?.release();
    } finally {
      await options.store.abandon(claim.key, claim.owner);
    }
    return true;
  }
  return false;
}

/**
 * onError before an execution started: give the key back so the client can retry. Once
 * the engine was asked (it refused, or did not answer and may have queued it all the
 * same), the key remembers that execution: the retry starts the same one.
 */
export async function releaseIdempotencyKey(
  options: IdempotencyOptions,
  ctx: WebhookContext,
): Promise<void> {
  const claim = ctx.idempotencyClaim;
  if (!claim) return;
  ctx.idempotencyClaim = undefined;
  const { executionId, executionToken } = ctx;
  // Given back only while the claim is still this request's: one whose lease ran out
  // and that a retry claimed since is that retry's to complete or give back (ADR 0027).
  // The engine was asked (the token is made just before): its id and token. Refused
  // before that, a retry keeps the hint it came with: the execution an earlier attempt
  // asked for may be queued all the same.
  await options.store.abandon(
    claim.key,
    claim.owner,
    executionId !== undefined && executionToken !== undefined
      ? { executionId, token: executionToken }
      : ctx.resume,
  );
}
