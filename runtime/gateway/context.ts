// The per-request state of a webhook request, kept on the Fastify request, and the
// answer a response mode gives when it fails. The request path (webhook-routes.ts),
// the response modes and the Idempotency-Key claims all import this module; it
// imports none of them, so the arrows run one way.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ErrorCode } from '../errors.ts';
import type { AcceptedTraceContext } from '../engine/outbound/trace-context.ts';
import type { RequestSpan } from '../tracing/tracing.ts';
import type { ResumeHint } from './idempotency/store.ts';
import type { DeliveryReplay } from './security/auth/signature/verify.ts';
import { sendProblem, toProblem } from './problem-handler.ts';
import type { RouteMatch } from './route-table.ts';

/** Per-request state of a webhook request, kept on the Fastify request. */
export interface WebhookContext {
  match: RouteMatch;
  startedAt: bigint;
  arrivedAt: number;
  requestId: string;
  correlationId: string;
  consumer?: string;
  executionId?: string;
  /** The caller's links to its execution (execution-links.ts), once it has started. */
  executionLinks?: { self: string; events: string };
  /** The token of those links, made as the engine is asked to start the execution. */
  executionToken?: string;
  /**
   * The execution (id and link token) that an earlier request with this request's
   * Idempotency-Key asked for and got no answer about: this one starts that one.
   */
  resume?: ResumeHint;
  /**
   * The execution (id and link token) this request starts, chosen before it claimed its
   * Idempotency-Key and kept with the claim: should the claim's lease run out before it
   * is answered or given back (the process died mid-start), the retry resumes this one
   * instead of starting a second (ADR 0027, amended 2026-11-28 (night)). Not set when
   * `resume` is.
   */
  planned?: ResumeHint;
  problem?: ErrorCode;
  /** The request body as received (idempotency fingerprints, signature checks). */
  rawBody?: Buffer;
  /**
   * Set once a signed delivery's signature was verified (auth.method signature);
   * `release` frees its replay claim when the delivery is answered with an error;
   * `rateLimitHeaders` are those of its rate-limit count, taken only once verified.
   * `delivery`: its replay key is its id, and the claim waits for the idempotency claim
   * (the id is the request's implicit idempotency key, claims.ts).
   */
  signature?: {
    release?: () => Promise<void>;
    rateLimitHeaders?: Record<string, string>;
    delivery?: DeliveryReplay;
  };
  /**
   * Set while this request owns an Idempotency-Key claim: the key, and the owner id its
   * claim was given (the store writes the key's answer or gives it back only for it).
   */
  idempotencyClaim?: { key: string; owner: string } | undefined;
  /**
   * That key is a signed delivery's id (no Idempotency-Key was sent, claims.ts): a
   * provider's retry must be able to succeed, so a 5xx after the run is not kept, and a
   * discarded success answers 202, never 410 (which Standard Webhooks senders take as
   * "disable this endpoint").
   */
  idempotencyImplicit?: boolean;
  /**
   * How long that key is kept (ms), set with it: the execution it starts is marked with
   * it (StartRequest.idempotencyWindowMs), and leaves a tombstone that long if discarded.
   */
  idempotencyWindowMs?: number;
  /**
   * Set when the client left before its execution's answer (a waiting response mode):
   * nothing is sent, so the key's claim is given back with the execution's hint, and
   * a retry gets that execution's answer instead of running it again.
   */
  clientLeft?: boolean;
  /** The request's SERVER span, when tracing is on (ADR 0040). */
  span?: RequestSpan;
  /**
   * Tracing on: the caller's trace context as the policy accepted it, read once when the
   * span starts (its parent) and kept for the trigger output's metadata. Never set with
   * tracing off (the trigger output reads the headers itself).
   */
  callerTrace?: AcceptedTraceContext;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the webhook routes' onRequest hook once the request matched a route. */
    webhook: WebhookContext | null;
  }
}

/** Answer a problem from inside a response mode, keeping the context's problem code. */
export function replyProblem(
  request: FastifyRequest,
  reply: FastifyReply,
  error: unknown,
): FastifyReply {
  const problem = toProblem(error);
  if (request.webhook) request.webhook.problem = problem.code;
  return sendProblem(reply, request, problem);
}
