// Async Callback delivery: POST the execution result to the caller's callback URL,
// signed per Standard Webhooks (webhook-id, webhook-timestamp, webhook-signature),
// retried with exponential backoff and jitter. Body and headers: docs/callbacks.md.
import { createHmac, randomBytes } from 'node:crypto';
import {
  SECRET_PREFIX,
  signingSecretKey,
  signingSecretProblem,
} from '../../api/callback-signing-secret.ts';
import { HttpProblem } from '../errors.ts';
import {
  OutboundGuard,
  OutboundRefusedError,
  type OutboundGuardOptions,
  type OutboundTarget,
  type WorkflowPolicySource,
} from './outbound/guard.ts';
import { OutboundTimeoutError, sendOutbound } from './outbound/request.ts';
import { tracingHeaders, withSpan } from './outbound/trace-context.ts';
import type { Execution, ExecutionError, ExecutionStatus } from './ports.ts';
import type { TraceSpan } from '../tracing/tracing.ts';
import { AbortedError, backoffDelay, errorMessage, sleep } from './util.ts';

export const MAX_CALLBACK_URL_LENGTH = 2048;

/** The JSON body POSTed to the callback URL. */
export interface CallbackBody {
  type: 'execution.completed' | 'execution.failed';
  executionId: string;
  workflowId: string;
  triggerKey: string;
  status: ExecutionStatus;
  /** Present when status is succeeded. */
  output?: unknown;
  /** Present when status is failed. */
  error?: ExecutionError;
  createdAt: string;
  startedAt?: string;
  finishedAt?: string;
  correlationId: string;
  requestId: string;
}

export interface CallbackSenderOptions {
  /**
   * Signing secret(s), `whsec_` + base64 of 24-64 bytes. Several: all sign (rotation,
   * space-separated signatures); the first is `secret`. Default: 32 random bytes.
   */
  secret?: string | string[];
  /** Attempts in all (first + retries). Default 5. */
  maxAttempts?: number;
  /** Time limit per attempt. Default 15 000 ms. */
  timeoutMs?: number;
  /** First wait between attempts; doubles each time, with jitter. Default 1000 ms. */
  backoffMs?: number;
  /** Longest wait between attempts (also caps Retry-After). Default 60 000 ms. */
  maxBackoffMs?: number;
  /** The address guard (callbacks are https-only unless allow-listed). */
  guard?: OutboundGuard | OutboundGuardOptions;
  /** Clock in ms (tests). */
  now?: () => number;
}

/**
 * The secrets that sign one delivery attempt: a list (empty: the sender's own), or why
 * the attempt cannot be signed (`unsigned`: it is not sent, and counts as failed).
 */
export type AttemptSecrets = readonly string[] | { unsigned: string };

/**
 * Asked before each attempt of a delivery for the secrets that sign it, as they are
 * then (the trigger's route record: a Secret rotated during a delivery signs its next
 * attempt). Should not reject; a rejection is an attempt that cannot be signed.
 */
export type SecretsLookup = () => Promise<AttemptSecrets>;

export interface DeliveryResult {
  delivered: boolean;
  webhookId: string;
  attempts: number;
  /** Status of the last response, if any. */
  status?: number;
  /** Why it was not delivered. */
  reason?: string;
  /** The outbound policy refused the destination: nothing was sent. */
  refused?: boolean;
}

/** A fresh signing secret: `whsec_` + base64 of `bytes` random bytes (24-64). */
export function generateSecret(bytes = 32): string {
  if (bytes < 24 || bytes > 64) throw new Error('a signing secret has 24 to 64 bytes');
  return SECRET_PREFIX + randomBytes(bytes).toString('base64');
}

/** `v1,<base64 HMAC-SHA256(key, "id.timestamp.body")>` for each secret, space-separated. */
export function signPayload(
  secrets: string | readonly string[],
  webhookId: string,
  timestampSeconds: number,
  body: string | Uint8Array,
): string {
  const list = typeof secrets === 'string' ? [secrets] : secrets;
  return list
    .map((secret) => {
      const hmac = createHmac('sha256', signingSecretKey(secret));
      hmac.update(`${webhookId}.${timestampSeconds}.`);
      hmac.update(body);
      return `v1,${hmac.digest('base64')}`;
    })
    .join(' ');
}

/** The body sent for a finished execution. */
export function callbackBody(execution: Execution): CallbackBody {
  const succeeded = execution.status === 'succeeded';
  return {
    type: succeeded ? 'execution.completed' : 'execution.failed',
    executionId: execution.id,
    workflowId: execution.workflowId,
    triggerKey: execution.triggerKey,
    status: execution.status,
    ...(succeeded ? { output: execution.output ?? null } : {}),
    ...(execution.error ? { error: execution.error } : {}),
    createdAt: execution.createdAt,
    ...(execution.startedAt ? { startedAt: execution.startedAt } : {}),
    ...(execution.finishedAt ? { finishedAt: execution.finishedAt } : {}),
    correlationId: execution.input.metadata.correlationId,
    requestId: execution.input.metadata.requestId,
  };
}

/** The webhook-id of an execution's callback: the same across retries and re-runs. */
export function webhookIdFor(executionId: string): string {
  return `msg_${executionId}`;
}

function toGuard(guard: OutboundGuard | OutboundGuardOptions | undefined): OutboundGuard {
  return guard instanceof OutboundGuard ? guard : new OutboundGuard(guard ?? {});
}

/**
 * Checks a callback URL before the 202 is sent: present, at most 2048 characters,
 * https (unless the cluster outbound policy names the destination), allowed by the
 * outbound policy as far as the URL tells (a literal IP, a denied or unlisted host
 * name), narrowed for `workflow` when given. Host names are checked again at connect
 * time. Throws HttpProblem HG_ERR_CALLBACK_URL_MISSING / HG_ERR_CALLBACK_URL_REFUSED.
 */
export function validateCallbackUrl(
  url: string | undefined,
  guard: OutboundGuard | OutboundGuardOptions = {},
  workflow?: WorkflowPolicySource,
): URL {
  if (url === undefined || url.trim() === '') {
    throw new HttpProblem('HG_ERR_CALLBACK_URL_MISSING', 'A callback URL is required');
  }
  if (url.length > MAX_CALLBACK_URL_LENGTH) {
    throw new HttpProblem('HG_ERR_CALLBACK_URL_REFUSED', 'Callback URL too long');
  }
  const owned = !(guard instanceof OutboundGuard);
  const checker = toGuard(guard);
  try {
    const target = workflow ? checker.forWorkflow(workflow) : checker;
    return target.check(url, { protocols: ['https:'] }).url;
  } catch (error) {
    const reason = error instanceof OutboundRefusedError ? error.message : errorMessage(error);
    throw new HttpProblem('HG_ERR_CALLBACK_URL_REFUSED', `Callback URL refused: ${reason}`);
  } finally {
    if (owned) void checker.close();
  }
}

/**
 * The lookup's answer; one that rejects is an attempt that cannot be signed. Undefined
 * once `signal` aborts (shutdown): a read that does not answer (a Redis Cluster that is
 * down keeps it queued with no time limit) must not hold the engine's close.
 */
async function asked(
  lookup: SecretsLookup,
  signal: AbortSignal | undefined,
): Promise<AttemptSecrets | undefined> {
  if (signal?.aborted) return undefined;
  let onAbort = (): void => {};
  const aborted = new Promise<undefined>((resolve) => {
    onAbort = () => resolve(undefined);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
  const answer = Promise.resolve()
    .then(lookup)
    .catch((): AttemptSecrets => ({ unsigned: 'the signing secrets could not be read' }));
  try {
    return await Promise.race([answer, aborted]);
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }
}

function retryAfterMs(value: string | undefined, cap: number): number | undefined {
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.min(cap, Math.max(0, seconds * 1000));
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.min(cap, Math.max(0, date - Date.now()));
}

type Attempt =
  | { outcome: 'delivered'; status: number }
  | { outcome: 'stop'; status?: number; reason: string; refused?: boolean }
  | { outcome: 'retry'; status?: number; reason: string; waitMs?: number };

/** The secrets an attempt signs with, or that attempt failed without sending. */
type Signing = { secrets: readonly string[] } | { failed: Extract<Attempt, { reason: string }> };

export class CallbackSender {
  /** The secrets that sign; `secret` (the first) is the one to publish to receivers. */
  readonly secrets: string[];
  readonly guard: OutboundGuard;
  readonly #maxAttempts: number;
  readonly #timeoutMs: number;
  readonly #backoffMs: number;
  readonly #maxBackoffMs: number;
  readonly #now: () => number;

  constructor(options: CallbackSenderOptions = {}) {
    const secrets = options.secret ?? generateSecret();
    this.secrets = Array.isArray(secrets) ? [...secrets] : [secrets];
    if (this.secrets.length === 0) throw new Error('at least one signing secret');
    for (const s of this.secrets) signingSecretKey(s);
    this.guard = toGuard(options.guard);
    this.#maxAttempts = Math.max(1, options.maxAttempts ?? 5);
    this.#timeoutMs = options.timeoutMs ?? 15_000;
    this.#backoffMs = options.backoffMs ?? 1000;
    this.#maxBackoffMs = options.maxBackoffMs ?? 60_000;
    this.#now = options.now ?? Date.now;
  }

  /** The verification secret receivers use (publish it, e.g. in the trigger status). */
  get secret(): string {
    return this.secrets[0] as string;
  }

  /** validateCallbackUrl with this sender's guard (narrowed for `workflow`, when given). */
  validate(url: string | undefined, workflow?: WorkflowPolicySource): URL {
    return validateCallbackUrl(url, this.guard, workflow);
  }

  /**
   * Delivers the result of a finished execution to `url`, under the outbound policy
   * narrowed for `workflow` when given, signed with `secrets` when given (the trigger's
   * response.callbackSecretRef: a list for every attempt, or a lookup asked before each
   * one) or else this sender's; never throws for HTTP outcomes.
   */
  async deliver(
    url: string,
    execution: Execution,
    options: {
      signal?: AbortSignal;
      workflow?: WorkflowPolicySource;
      secrets?: readonly string[] | SecretsLookup | undefined;
      /** The execution's span (tracing on): each attempt is a CLIENT span under it. */
      span?: TraceSpan | undefined;
    } = {},
  ): Promise<DeliveryResult> {
    const target = options.workflow ? this.guard.forWorkflow(options.workflow) : this.guard;
    const webhookId = webhookIdFor(execution.id);
    const given = options.secrets;
    const lookup = typeof given === 'function' ? given : undefined;
    // A list is checked once, before anything is sent; a lookup's answer at each attempt.
    const fixed = typeof given === 'function' ? undefined : this.#signing(given ?? []);
    if (fixed && 'failed' in fixed) {
      return { delivered: false, webhookId, attempts: 0, reason: fixed.failed.reason };
    }
    const body = JSON.stringify(callbackBody(execution));
    const tracing = tracingHeaders(execution.input);
    const parent = options.span;
    let attempt = 0;
    const send = (secrets: readonly string[]) => {
      if (parent === undefined)
        return this.#attempt(target, url, webhookId, body, tracing, secrets, options.signal);
      const span = parent.outbound({ method: 'POST', url, purpose: 'callback', attempt });
      return this.#attempt(
        target,
        url,
        webhookId,
        body,
        withSpan(tracing, span),
        secrets,
        options.signal,
      ).then((result) => {
        if (result.status !== undefined) span.answered(result.status);
        else if (result.outcome !== 'delivered') span.fail(result.reason, result.outcome);
        span.end();
        return result;
      });
    };
    // What signs this attempt: the list, or the lookup's answer now (unless shut down).
    const signingNow = async (): Promise<Signing> => {
      if (fixed || !lookup) return fixed ?? this.#signing([]);
      const answer = await asked(lookup, options.signal);
      if (answer === undefined)
        return { failed: { outcome: 'stop', reason: 'delivery cancelled (shutdown)' } };
      return this.#signing(answer);
    };
    let last: Attempt = { outcome: 'retry', reason: 'not attempted' };
    while (attempt < this.#maxAttempts) {
      attempt++;
      const signing = await signingNow();
      last = 'failed' in signing ? signing.failed : await send(signing.secrets);
      if (last.outcome !== 'retry') break;
      if (attempt >= this.#maxAttempts) break;
      const wait = last.waitMs ?? backoffDelay(this.#backoffMs, attempt, this.#maxBackoffMs);
      try {
        await sleep(wait, options.signal);
      } catch (error) {
        last = { outcome: 'stop', reason: errorMessage(error) };
        break;
      }
    }
    return {
      delivered: last.outcome === 'delivered',
      webhookId,
      attempts: attempt,
      ...(last.status !== undefined ? { status: last.status } : {}),
      ...(last.outcome !== 'delivered' ? { reason: last.reason } : {}),
      ...(last.outcome === 'stop' && last.refused ? { refused: true } : {}),
    };
  }

  /** The secrets an attempt signs with, or that attempt failed without sending. */
  #signing(given: AttemptSecrets): Signing {
    // Retried: the route may be back by the next attempt (a Secret re-created, a store back).
    if ('unsigned' in given)
      return { failed: { outcome: 'retry', reason: `not signed: ${given.unsigned}` } };
    if (given.length === 0) return { secrets: this.secrets }; // checked when made
    if (given.some((secret) => signingSecretProblem(secret) !== undefined)) {
      // The operator checks a trigger's secrets before deploying it; a record written
      // otherwise is refused here rather than retried (never echoed: it is a secret).
      return { failed: { outcome: 'stop', reason: 'a callback signing secret is not usable' } };
    }
    return { secrets: given };
  }

  async #attempt(
    target: OutboundTarget,
    url: string,
    webhookId: string,
    body: string,
    tracing: Record<string, string>,
    secrets: readonly string[],
    signal: AbortSignal | undefined,
  ): Promise<Attempt> {
    const timestamp = Math.floor(this.#now() / 1000);
    try {
      const response = await sendOutbound(target, {
        method: 'POST',
        url,
        headers: {
          ...tracing,
          'content-type': 'application/json',
          'user-agent': 'hookgate-callbacks/1',
          'webhook-id': webhookId,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signPayload(secrets, webhookId, timestamp, body),
        },
        body,
        timeoutMs: this.#timeoutMs,
        protocols: ['https:'],
        // The status decides: a 2xx with a large body, or one still coming when the
        // attempt's time is up, was delivered (it was retried as a failure).
        maxResponseBytes: 64 * 1024,
        ignoreBody: true,
        ...(signal ? { signal } : {}),
      });
      const status = response.status;
      if (status >= 200 && status < 300) return { outcome: 'delivered', status };
      if (status === 410) return { outcome: 'stop', status, reason: 'receiver answered 410 Gone' };
      if (status === 429 || status >= 500) {
        const waitMs = retryAfterMs(response.headers['retry-after'], this.#maxBackoffMs);
        return {
          outcome: 'retry',
          status,
          reason: `receiver answered ${status}`,
          ...(waitMs !== undefined ? { waitMs } : {}),
        };
      }
      return { outcome: 'stop', status, reason: `receiver answered ${status}` };
    } catch (error) {
      if (error instanceof OutboundRefusedError) {
        return {
          outcome: 'stop',
          reason: `refused by the outbound policy: ${error.message}`,
          refused: true,
        };
      }
      if (signal?.aborted || error instanceof AbortedError) {
        return { outcome: 'stop', reason: 'delivery cancelled (shutdown)' };
      }
      if (error instanceof OutboundTimeoutError) return { outcome: 'retry', reason: error.message };
      return { outcome: 'retry', reason: `network error: ${errorMessage(error)}` };
    }
  }

  async close(): Promise<void> {
    await this.guard.close();
  }
}
