// Idempotency-Key on webhook requests (IETF httpapi idempotency-key draft):
//   same key + same request   → the first answer again (Idempotent-Replayed: true), no new run
//   same key + other request  → 422 idempotency-key-reused
//   same key, first still busy → 409 idempotency-in-progress (for the endpoint's
//                                timeout and a margin at most; then it may run again)
// Keys are scoped per endpoint and consumer, fingerprinted over method, path+query and the raw body,
// and kept for a window (24 h by default).
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

export const IDEMPOTENCY_HEADER = 'idempotency-key';
export const DEFAULT_IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;
const REPLAYED_HEADERS = ['content-type', 'location', 'x-correlation-id'];

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

/**
 * Claims the request's key. Returns true when the request should run; otherwise it has
 * answered (replay) or thrown (409/422/400).
 */
export async function claimIdempotencyKey(
  options: IdempotencyOptions,
  request: FastifyRequest,
  reply: FastifyReply,
  ctx: WebhookContext,
): Promise<boolean> {
  const header = request.headers[IDEMPOTENCY_HEADER];
  if (header === undefined) return true;
  const key = claimKey(ctx, parseIdempotencyKey(Array.isArray(header) ? header.join(',') : header));
  const fingerprint = requestFingerprint(request.method, request.url, ctx.rawBody);
  const windowMs = options.windowMs ?? DEFAULT_IDEMPOTENCY_WINDOW_MS;
  const leaseMs = parseDuration(ctx.match.route.spec.timeout) + CLAIM_LEASE_MARGIN_MS;
  const result = await options.store.begin(key, fingerprint, windowMs, leaseMs);
  switch (result.state) {
    case 'new':
      ctx.idempotencyKey = key;
      ctx.idempotencyWindowMs = windowMs;
      if (result.resume) ctx.resume = result.resume;
      return true;
    case 'replay': {
      const record = result.record;
      if (record.executionId) ctx.executionId = record.executionId;
      reply.code(record.status).headers(record.headers).header('idempotent-replayed', 'true');
      await reply.send(record.body);
      return false;
    }
    case 'in-progress':
      throw new HttpProblem(
        'HG_ERR_IDEMPOTENCY_IN_PROGRESS',
        'A request with this Idempotency-Key is still being processed',
      );
    case 'mismatch':
      throw new HttpProblem(
        'HG_ERR_IDEMPOTENCY_KEY_REUSED',
        'This Idempotency-Key was used with a different request',
      );
  }
}

/** onSend: store the answer of a request that owns its key, so a retry gets it again. */
export async function recordIdempotentAnswer(
  options: IdempotencyOptions,
  reply: FastifyReply,
  ctx: WebhookContext,
  payload: unknown,
): Promise<void> {
  const key = ctx.idempotencyKey;
  if (!key) return;
  ctx.idempotencyKey = undefined;
  const headers: Record<string, string> = {};
  for (const name of REPLAYED_HEADERS) {
    const value = reply.getHeader(name);
    if (typeof value === 'string') headers[name] = value;
  }
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
    // same execution instead (the caller's links, with the execution's token).
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
  await options.store.complete(key, record);
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
  const key = ctx.idempotencyKey;
  if (!key) return;
  ctx.idempotencyKey = undefined;
  const { executionId, executionToken } = ctx;
  // The engine was asked (the token is made just before): its id and token. Refused
  // before that, a retry keeps the hint it came with: the execution an earlier attempt
  // asked for may be queued all the same.
  await options.store.abandon(
    key,
    executionId !== undefined && executionToken !== undefined
      ? { executionId, token: executionToken }
      : ctx.resume,
  );
}
