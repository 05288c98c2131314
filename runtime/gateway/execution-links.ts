// Public, per-execution capability links on the webhook listener: what a webhook
// caller follows after a 202 (or a 408) without an admin token.
//
//   GET /webhook-executions/<id>?token=<t>         status, output or error, timestamps
//   GET /webhook-executions/<id>/events?token=<t>  the execution's SSE channel
//
// The gateway mints the token (32 random bytes, base64url) when it accepts a request
// and hands only its SHA-256 digest to the engine (`StartRequest.accessDigest`), which
// keeps it with the execution; every gateway sharing the store can check it. The token
// also comes as `Authorization: Bearer <t>`. A missing or wrong token, or an unknown
// id, answers the same 404 (`execution-link-not-found`): nothing confirms the id.
import { hash, randomFillSync, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { HttpProblem } from '../errors.ts';
import { isTerminal } from '../engine/execution-events.ts';
import { executionDiscarded } from '../engine/execution-store.ts';
import type { Execution, ExecutionEngine, ExecutionGone, SequencedEvent } from '../engine/ports.ts';
import type { RouteTable } from './route-table.ts';
import { corsHeaders } from './security/cors.ts';
import { openSse, SSE_HEARTBEAT_MS, takeStreamSlot, type SseStream } from './sse.ts';

export const EXECUTION_LINK_PREFIX = '/webhook-executions';
export const EXECUTION_TOKEN_QUERY = 'token';

export interface ExecutionToken {
  /** Given to the caller once, in the answer's links; never stored. */
  token: string;
  /** SHA-256 of the token, hex: what the execution record keeps. */
  digest: string;
}

export interface ExecutionLinks {
  self: string;
  events: string;
}

function sha256(value: string): Buffer {
  return hash('sha256', value, 'buffer');
}

/**
 * Random bytes for tokens, drawn from the CSPRNG 256 tokens at a time: one
 * randomBytes(32) call per request cost more than the rest of the link (bench/README.md).
 */
const TOKEN_BYTES = 32;
const pool = Buffer.alloc(TOKEN_BYTES * 256);
let poolOffset = pool.length;

function randomToken(): string {
  if (poolOffset === pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const token = pool.toString('base64url', poolOffset, poolOffset + TOKEN_BYTES);
  // Used bytes are not left behind in memory longer than needed.
  pool.fill(0, poolOffset, poolOffset + TOKEN_BYTES);
  poolOffset += TOKEN_BYTES;
  return token;
}

/**
 * A new token, without its digest (executionToken() makes it): the one a request with an
 * Idempotency-Key starts its execution with, chosen before it claims the key and kept
 * with the claim (claims.ts).
 */
export function randomExecutionToken(): string {
  return randomToken();
}

export function mintExecutionToken(): ExecutionToken {
  return executionToken(randomToken());
}

/** A token made earlier (an Idempotency-Key's retry), with its digest. */
export function executionToken(token: string): ExecutionToken {
  return { token, digest: hash('sha256', token, 'hex') };
}

/** The caller's links (relative to the webhook listener), the token in the query. */
export function publicExecutionLinks(id: string, token: string): ExecutionLinks {
  const self = `${EXECUTION_LINK_PREFIX}/${encodeURIComponent(id)}`;
  const query = `?${EXECUTION_TOKEN_QUERY}=${token}`;
  return { self: `${self}${query}`, events: `${self}/events${query}` };
}

/** Whether `token` is the one whose digest the execution keeps (constant time). */
export function tokenMatches(execution: Execution, token: string | undefined): boolean {
  const stored = execution.accessDigest;
  if (!stored || token === undefined || token === '' || token.length > 256) return false;
  const expected = Buffer.from(stored, 'hex');
  const given = sha256(token);
  return expected.length === given.length && timingSafeEqual(expected, given);
}

/** What the public view shows: no input payload, no per-run log, no digest. */
export function publicExecutionView(execution: Execution): Record<string, unknown> {
  return {
    executionId: execution.id,
    status: execution.status,
    createdAt: execution.createdAt,
    ...(execution.startedAt ? { startedAt: execution.startedAt } : {}),
    ...(execution.finishedAt ? { finishedAt: execution.finishedAt } : {}),
    ...(execution.status === 'succeeded' ? { output: execution.output ?? null } : {}),
    // The stored output was cut (record-bounds.ts): its whole size.
    ...(execution.status === 'succeeded' && execution.truncated?.output !== undefined
      ? { truncated: { output: execution.truncated.output } }
      : {}),
    ...(execution.error
      ? {
          error: {
            message: execution.error.message,
            ...(execution.error.code ? { code: execution.error.code } : {}),
          },
        }
      : {}),
  };
}

/**
 * What a caller waiting for an execution is answered when it is gone from the store
 * before its end reached the gateway (ExecutionEngine.subscribe's `onGone`): 410
 * execution-discarded when its tombstone says it succeeded and was discarded, else 410
 * execution-result-gone (how it ended is not known here).
 */
export function executionGoneProblem(id: string, gone: ExecutionGone): HttpProblem {
  if (gone.discarded) return executionDiscarded(id, gone.discarded);
  return new HttpProblem(
    'HG_ERR_EXECUTION_RESULT_GONE',
    `Execution ${id} is no longer in the store (its record was discarded, dropped or expired) and its end did not reach this gateway; how it ended is not known`,
    { extensions: { executionId: id } },
  );
}

/**
 * Forward an execution's events (after `afterSeq`) as SSE frames, the seq as the
 * event id (for Last-Event-ID), and end the stream with the final event. A resumed
 * stream reads the history from the start and sends what is after `afterSeq`, so that
 * the final event ends it even when the client's id is at or past it. An execution
 * found gone before its end (`onGone`) ends the stream with a last `gone` event, its
 * data the problem document (executionGoneProblem). `id` must be known to be written
 * (started or read).
 */
export function pipeExecution(
  engine: ExecutionEngine,
  id: string,
  afterSeq: number,
  sse: SseStream,
): () => void {
  return engine.subscribe(
    id,
    0,
    (event) => {
      if (event.seq > afterSeq) sendEvent(sse, event);
      if (isTerminal(event)) sse.end();
    },
    (gone) => {
      sse.send('gone', executionGoneProblem(id, gone).toDocument());
      sse.end();
    },
  );
}

function sendEvent(sse: SseStream, event: SequencedEvent): void {
  const { seq, type, ...data } = event;
  sse.send(type, { type, ...data }, seq);
}

/**
 * A finished execution's events after `afterSeq`, for a stream resumed with
 * Last-Event-ID (its history ends with the final event); undefined for a fresh stream,
 * an execution still running, or a history that did not end within `waitMs`.
 */
function finishedTail(
  engine: ExecutionEngine,
  execution: Execution,
  afterSeq: number,
  waitMs = 5_000,
): Promise<SequencedEvent[] | undefined> {
  if (afterSeq === 0 || (execution.status !== 'succeeded' && execution.status !== 'failed'))
    return Promise.resolve(undefined);
  return new Promise((resolve) => {
    const tail: SequencedEvent[] = [];
    let done = false;
    let unsubscribe: (() => void) | undefined;
    const finish = (answer: SequencedEvent[] | undefined) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      unsubscribe?.();
      resolve(answer);
    };
    const timer = setTimeout(() => finish(undefined), waitMs);
    unsubscribe = engine.subscribe(
      execution.id,
      0,
      (event) => {
        if (event.seq > afterSeq) tail.push(event);
        if (isTerminal(event)) finish(tail);
      },
      // Gone since it was read: the stream that follows says so.
      () => finish(undefined),
    );
    if (done) unsubscribe();
  });
}

/**
 * Answer an execution's SSE channel (both listeners): its events after Last-Event-ID,
 * ending with the execution. A finished execution whose events the client has all is
 * 204, which tells an EventSource to stop reconnecting (an empty stream that ends would
 * have it reconnect for ever); its remaining events are sent from the one history read.
 * The stream's slot is taken first, before the history is read: past the execution's
 * cap on this listener 429, past the process's 503 (sse.ts, StreamSlots).
 */
export async function serveExecutionEvents(
  engine: ExecutionEngine,
  execution: Execution,
  request: FastifyRequest,
  reply: FastifyReply,
  options: Omit<NonNullable<Parameters<typeof openSse>[2]>, 'onEnd' | 'slot'>,
): Promise<FastifyReply> {
  const slot = takeStreamSlot(request, execution.id);
  const after = lastEventIdOf(request);
  let tail: SequencedEvent[] | undefined;
  try {
    tail = await finishedTail(engine, execution, after);
  } catch (error) {
    slot.release();
    throw error;
  }
  if (tail?.length === 0) {
    slot.release();
    return reply.code(204).send();
  }
  let unsubscribe: (() => void) | undefined;
  let looking: NodeJS.Timeout | undefined;
  const { sse, body } = openSse(request, reply, {
    ...options,
    slot,
    onEnd: () => {
      unsubscribe?.();
      clearInterval(looking);
    },
  });
  if (tail) {
    for (const event of tail) sendEvent(sse, event);
    sse.end();
  } else {
    unsubscribe = pipeExecution(engine, execution.id, after, sse);
    // A record gone while its stream is open, its end never published (a discarded
    // success whose discard came between the check and the subscription, ADR 0041; one
    // dropped by its store's budget): the stream ends at the next look, not when its
    // reader leaves; the reader's reconnection then gets the link's 404. (The Redis relay
    // finds most such at once, onGone: this look is for the rest.)
    looking = setInterval(() => {
      engine.get(execution.id).then(
        (still) => {
          if (still === undefined) sse.end();
        },
        () => {},
      );
    }, options.heartbeatMs ?? SSE_HEARTBEAT_MS);
  }
  return reply.send(body);
}

/** The seq after which a resumed SSE channel starts (Last-Event-ID), else 0. */
export function lastEventIdOf(request: FastifyRequest): number {
  const header = request.headers['last-event-id'];
  return typeof header === 'string' && /^\d{1,9}$/.test(header) ? Number(header) : 0;
}

function tokenOf(request: FastifyRequest): string | undefined {
  const auth = request.headers.authorization;
  if (typeof auth === 'string') {
    const bearer = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    if (bearer) return bearer[1];
  }
  const query = (request.query as Record<string, unknown> | undefined)?.[EXECUTION_TOKEN_QUERY];
  return typeof query === 'string' ? query : undefined;
}

export interface ExecutionLinkOptions {
  engine: ExecutionEngine;
  /** Routes, for the CORS policy of the trigger the execution came in on. */
  table?: RouteTable;
  heartbeatMs?: number;
}

export function executionLinkRoutes(app: FastifyInstance, options: ExecutionLinkOptions): void {
  const { engine, table } = options;

  const authorised = async (request: FastifyRequest, reply: FastifyReply): Promise<Execution> => {
    const { id } = request.params as { id: string };
    const execution = await engine.get(id);
    if (!execution || !tokenMatches(execution, tokenOf(request))) {
      throw new HttpProblem('HG_ERR_EXECUTION_LINK_NOT_FOUND', 'No execution at this link');
    }
    reply.header('cache-control', 'no-store').header('referrer-policy', 'no-referrer');
    // The trigger's CORS policy, as on the endpoint itself (found by the request's path).
    const match = table?.match(execution.input.metadata.path);
    if (match && match.route.key === execution.triggerKey) {
      reply.headers(corsHeaders(match.route.spec.cors, request.headers.origin, 'GET'));
    }
    return execution;
  };

  app.get(`${EXECUTION_LINK_PREFIX}/:id`, async (request, reply) => {
    const execution = await authorised(request, reply);
    return reply.type('application/json; charset=utf-8').send(publicExecutionView(execution));
  });

  app.get(`${EXECUTION_LINK_PREFIX}/:id/events`, async (request, reply) => {
    const execution = await authorised(request, reply);
    return serveExecutionEvents(engine, execution, request, reply, {
      ...(options.heartbeatMs ? { heartbeatMs: options.heartbeatMs } : {}),
    });
  });
}
