// The six response modes: when the caller is answered, with what status and body.
//
//   immediateAck         202 {executionId,status,links} at once
//   asyncCallback        202 at once; the result is POSTed to the caller's callback URL
//   ackSubscribe         202 with an SSE channel (channel.url = links.events) of progress events
//
// The links (and Location) are the caller's public capability links on this listener
// (execution-links.ts), each carrying the execution's token; never the admin API.
//   waitForCompletion    200 with the final output (408 with a handle on timeout)
//   sseStream            200 text/event-stream of progress events until the result
//   waitForResponseNode  the first respond node's status, headers and body
import type { FastifyReply, FastifyRequest } from 'fastify';
import { DEFAULT_STATUS_CODE } from '../../api/v1alpha1/index.ts';
import { HttpProblem } from '../errors.ts';
import type {
  Execution,
  ExecutionEngine,
  ExecutionError,
  ExecutionGone,
  OutputValidator,
  SequencedEvent,
  StartRequest,
  TriggerOutput,
} from '../engine/ports.ts';
import { discardsSucceeded } from '../engine/execution-store.ts';
import { callbackSigning, triggerRef } from '../engine/trigger-ref.ts';
import type { RouteRecord, WorkflowRegistration } from '../../api/records/records.ts';
import { parseDuration } from '../../api/v1alpha1/common.ts';
import { renderBody } from './response-body.ts';
import { setAuthorHeader } from './response-headers.ts';
import { openSse, takeStreamSlot } from './sse.ts';
import {
  executionGoneProblem,
  executionToken,
  mintExecutionToken,
  pipeExecution,
  publicExecutionLinks,
  type ExecutionLinks,
} from './execution-links.ts';
import { replyProblem, type WebhookContext } from './context.ts';
import { CALLBACK_HEADER, CALLBACK_QUERY } from './callback-url.ts';

export interface ModeDeps {
  engine: ExecutionEngine;
  /**
   * Checks a caller's callback URL before the 202, under the outbound policy narrowed
   * for the workflow (throws HG_ERR_CALLBACK_URL_REFUSED).
   */
  validateCallbackUrl?: (url: string, workflow: WorkflowRegistration) => void;
  /** The trigger's output schema validator, if it has one (the engine applies it). */
  outputValidator?: (route: RouteRecord) => OutputValidator | undefined;
  heartbeatMs?: number;
  /**
   * Told once a request's execution has started: the gateway accepted the request (schema
   * learning samples its body then). Not told of a request refused after its input check
   * (an SSE Stream without a stream slot, a missing or refused callback URL, a full
   * queue), nor of one resuming an execution another request started (its key's hint):
   * one resuming an id whose start never wrote it (the first try was refused by the
   * engine, or died before it asked) is told, since its own start created it.
   */
  accepted?: (m: ModeRequest) => void;
}

export interface ModeRequest {
  request: FastifyRequest;
  reply: FastifyReply;
  route: RouteRecord;
  workflow: WorkflowRegistration;
  input: TriggerOutput;
  ctx: WebhookContext;
}

const JSON_UTF8 = 'application/json; charset=utf-8';

/** An execution as started by a mode, with the caller's links to it. */
interface Started {
  execution: Pick<Execution, 'id' | 'status'>;
  links: ExecutionLinks;
  /** A resumed execution that succeeded and was discarded (its tombstone): nothing runs. */
  discarded?: true;
}

/** Not an async function: each mode's own promise is the answer, without another around it. */
export function respond(deps: ModeDeps, m: ModeRequest): Promise<FastifyReply> {
  const mode = m.route.spec.response.mode;
  switch (mode) {
    case 'immediateAck':
      return start(deps, m).then((started) => acknowledge(m, started, {}));
    case 'ackSubscribe':
      return start(deps, m, watching(m)).then((started) =>
        started.discarded
          ? acknowledgeDelivered(m, started)
          : acknowledge(m, started, { channel: { type: 'sse', url: started.links.events } }),
      );
    case 'asyncCallback':
      return asyncCallback(deps, m);
    case 'waitForCompletion':
      return waitForCompletion(deps, m);
    case 'waitForResponseNode':
      return waitForResponseNode(deps, m);
    case 'sseStream':
      return sseStream(deps, m);
  }
}

/**
 * Start the execution with a fresh capability token: the engine keeps its digest, the
 * caller gets the token in the links. Not async itself (fewer ticks per request).
 */
function start(
  deps: ModeDeps,
  m: ModeRequest,
  extra: Partial<StartRequest> = {},
): Promise<Started> {
  const outputValidator = deps.outputValidator?.(m.route);
  const resumed = m.ctx.resume;
  // The token kept with the request's Idempotency-Key claim, if any (claims.ts).
  const kept = resumed ?? m.ctx.planned;
  const { token, digest } = kept ? executionToken(kept.token) : mintExecutionToken();
  m.ctx.executionToken = token;
  const request: StartRequest = {
    workflow: m.workflow,
    trigger: triggerRef(m.route),
    input: m.input,
    accessDigest: digest,
    ...(outputValidator ? { outputValidator } : {}),
    ...extra,
  };
  // Idempotency-Key: a tombstone if it succeeds and is discarded; the key's hint may name
  // one (ADR 0041).
  const window = m.ctx.idempotencyWindowMs;
  if (window !== undefined) request.idempotencyWindowMs = window;
  if (resumed) request.hinted = true;
  // Tracing on: the execution's span is a child of this request's (ADR 0040).
  if (m.ctx.span !== undefined) {
    const trace = m.ctx.span.carrier();
    if (trace !== undefined) request.trace = trace;
  }
  const started = deps.engine.start(request).then((execution) => {
    const links = publicExecutionLinks(execution.id, token);
    m.ctx.executionLinks = links;
    // A resumed one only if its start wrote the execution (the engine says so): found,
    // an earlier try of the request wrote it, and a request is one sample at most.
    if (!resumed || execution.created) deps.accepted?.(m);
    return { execution, links };
  });
  // Only a request that resumes an execution (its key's hint) can find it discarded.
  return resumed ? started.catch((error: unknown) => resumedDiscarded(m, token, error)) : started;
}

/**
 * The execution a request resumed has succeeded and been discarded since (its
 * tombstone, ADR 0041): nothing runs again. Immediate ACK and Async Callback answer 202
 * with its id, as the first answer would have been (its links answer 404, as for any
 * discarded execution); the waiting modes and Ack + Subscribe, whose caller wants a
 * result that is gone, answer 410 execution-discarded. Under a signed delivery's
 * implicit key (its id) every mode answers 202 succeeded (acknowledgeDelivered): its
 * sender only needs to know the delivery was processed, and a Standard Webhooks sender
 * disables an endpoint that answers 410. The links are set either way, so the answer is
 * the key's (onSend stores it; onError does not give the key back).
 */
function resumedDiscarded(m: ModeRequest, token: string, error: unknown): Started {
  if (!(error instanceof HttpProblem) || error.code !== 'HG_ERR_EXECUTION_DISCARDED') throw error;
  const id = m.ctx.executionId as string;
  const links = publicExecutionLinks(id, token);
  m.ctx.executionLinks = links;
  const mode = m.route.spec.response.mode;
  if (mode !== 'immediateAck' && mode !== 'asyncCallback' && m.ctx.idempotencyImplicit !== true)
    throw error;
  return { execution: { id, status: 'succeeded' }, links, discarded: true };
}

// Spread into each start's request, never changed.
const WATCHED: Partial<StartRequest> = Object.freeze({ watched: true });
const WATCHED_FOR_RESPOND: Partial<StartRequest> = Object.freeze({
  watched: true,
  respondAwaited: true,
});
const NOT_WATCHED: Partial<StartRequest> = Object.freeze({});

/**
 * A waiting mode's start, and Ack + Subscribe's (its caller subscribes at once): marked
 * watched when its workflow discards the records of succeeded executions, whose end
 * would otherwise be gone before this gateway listens (StartRequest.watched, ADR 0041).
 * Wait for Response Node's also says its caller waits for a respond node: a success
 * without one answers that caller 500, and keeps its record (StartRequest.respondAwaited).
 */
function watching(m: ModeRequest): Partial<StartRequest> {
  if (!discardsSucceeded(m.workflow)) return NOT_WATCHED;
  return m.route.spec.response.mode === 'waitForResponseNode' ? WATCHED_FOR_RESPOND : WATCHED;
}

function successStatus(route: RouteRecord): number {
  return route.spec.response.statusCode ?? DEFAULT_STATUS_CODE[route.spec.response.mode];
}

function acknowledge(
  m: ModeRequest,
  { execution, links }: Started,
  extra: Record<string, unknown>,
  status = successStatus(m.route),
): FastifyReply {
  m.reply.code(status);
  if (status === 204) return m.reply.send();
  // Serialised here, with the charset Fastify would add: a string body in a JSON type
  // with a charset goes straight to onSend, without the pre-serialisation hook chain.
  return m.reply
    .type(JSON_UTF8)
    .header('location', links.self)
    .send(ackBody(execution, links, extra));
}

/**
 * A signed delivery (implicit key) whose execution succeeded and was discarded, in a mode
 * that would wait for its result or its events: 202 `{executionId, status: succeeded,
 * links}` (the links answer 404, as for any discarded execution). Its sender learns the
 * delivery was processed; 410 would make a Standard Webhooks sender disable the endpoint.
 */
function acknowledgeDelivered(m: ModeRequest, started: Started): FastifyReply {
  return acknowledge(
    m,
    { ...started, execution: { id: started.execution.id, status: 'succeeded' } },
    {},
    202,
  );
}

/**
 * `JSON.stringify({ executionId, status, links, ...extra })`, the same text, built from
 * its strings: the answer of every accepted request, without the object and spread.
 */
function ackBody(execution: Started['execution'], links: ExecutionLinks, extra: object): string {
  const head =
    `{"executionId":${JSON.stringify(execution.id)},"status":${JSON.stringify(execution.status)}` +
    `,"links":{"self":${JSON.stringify(links.self)},"events":${JSON.stringify(links.events)}}`;
  const rest = JSON.stringify(extra);
  return rest === '{}' ? `${head}}` : `${head},${rest.slice(1)}`;
}

function callbackUrlOf(request: FastifyRequest): string | undefined {
  const header = request.headers[CALLBACK_HEADER];
  if (typeof header === 'string' && header !== '') return header;
  const query = (request.query as Record<string, unknown> | undefined)?.[CALLBACK_QUERY];
  // Given twice: which one was meant? Refused rather than guessed (or called missing).
  if (Array.isArray(query))
    throw new HttpProblem(
      'HG_ERR_CALLBACK_URL_REFUSED',
      `Give one ${CALLBACK_QUERY} query parameter, not ${query.length}`,
    );
  return typeof query === 'string' && query !== '' ? query : undefined;
}

async function asyncCallback(deps: ModeDeps, m: ModeRequest): Promise<FastifyReply> {
  const url = callbackUrlOf(m.request);
  if (!url) {
    throw new HttpProblem(
      'HG_ERR_CALLBACK_URL_MISSING',
      `Send the callback URL in the ${CALLBACK_HEADER} header or the ${CALLBACK_QUERY} query parameter`,
    );
  }
  deps.validateCallbackUrl?.(url, m.workflow);
  const started = await start(deps, m, { callbackUrl: url, ...callbackSigning(m.route) });
  return acknowledge(m, started, { callbackUrl: url });
}

type Outcome =
  | { kind: 'event'; event: SequencedEvent }
  | { kind: 'timeout' }
  | { kind: 'closed' }
  | { kind: 'gone'; gone: ExecutionGone };

/**
 * Wait for the first event of the given types, the trigger's timeout, the client
 * leaving, or the execution found gone from the store before its end reached this
 * gateway (ExecutionEngine.subscribe's `onGone`).
 */
function waitFor(
  deps: ModeDeps,
  m: ModeRequest,
  executionId: string,
  types: SequencedEvent['type'][],
): Promise<Outcome> {
  return new Promise((resolve) => {
    let settled = false;
    const finish = (outcome: Outcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      m.reply.raw.off('close', onClose);
      queueMicrotask(() => unsubscribe());
      resolve(outcome);
    };
    const onClose = () => finish({ kind: 'closed' });
    const timer = setTimeout(
      () => finish({ kind: 'timeout' }),
      parseDuration(m.route.spec.timeout),
    );
    // Gone while the execution was being started (a slow enqueue): 'close' was emitted
    // before this listener.
    if (m.reply.raw.destroyed) {
      queueMicrotask(onClose);
    }
    m.reply.raw.on('close', onClose);
    const unsubscribe = deps.engine.subscribe(
      executionId,
      0,
      (event) => {
        if (types.includes(event.type)) finish({ kind: 'event', event });
      },
      (gone) => finish({ kind: 'gone', gone }),
    );
  });
}

function timeoutProblem(m: ModeRequest, { execution, links }: Started): HttpProblem {
  return new HttpProblem(
    'HG_ERR_REQUEST_TIMEOUT',
    `The workflow did not respond within ${m.route.spec.timeout}; it keeps running`,
    {
      headers: { location: links.self },
      extensions: { executionId: execution.id, links },
    },
  );
}

function failureProblem({ execution, links }: Started, error: ExecutionError) {
  const executionId = execution.id;
  const status =
    error.statusCode && error.statusCode >= 400 && error.statusCode <= 599 ? error.statusCode : 500;
  return new HttpProblem(error.code ?? 'HG_ERR_EXECUTION_FAILED', error.message, {
    status,
    extensions: {
      executionId,
      ...(error.nodeId ? { nodeId: error.nodeId } : {}),
      links,
    },
  });
}

/**
 * Start the execution and wait for the first of `types`. Answers the caller itself
 * when the client left (nothing), the timeout passed (408 with a handle), the
 * execution failed (its problem) or is gone with its result (410); otherwise hands the
 * event back.
 */
async function startAndAwait(
  deps: ModeDeps,
  m: ModeRequest,
  types: SequencedEvent['type'][],
): Promise<{ event: SequencedEvent; started: Started } | { answered: FastifyReply }> {
  const started = await start(deps, m, watching(m));
  if (started.discarded) return { answered: acknowledgeDelivered(m, started) };
  const outcome = await waitFor(deps, m, started.execution.id, types);
  if (outcome.kind === 'closed') {
    m.ctx.clientLeft = true;
    return { answered: m.reply };
  }
  if (outcome.kind === 'timeout') {
    return { answered: replyProblem(m.request, m.reply, timeoutProblem(m, started)) };
  }
  if (outcome.kind === 'gone') {
    if (m.ctx.idempotencyImplicit === true)
      return { answered: deliveryGone(m, started, outcome.gone) };
    const problem = executionGoneProblem(started.execution.id, outcome.gone);
    return { answered: replyProblem(m.request, m.reply, problem) };
  }
  if (outcome.event.type === 'failed') {
    return {
      answered: replyProblem(m.request, m.reply, failureProblem(started, outcome.event.error)),
    };
  }
  return { event: outcome.event, started };
}

/** How soon a signed delivery whose result is gone may be sent again (seconds). */
const RESULT_GONE_RETRY_AFTER_SECONDS = 1;

/**
 * A waiting signed delivery (implicit key) whose execution is gone before its end
 * reached this gateway. Discarded after it succeeded (its tombstone): 202 succeeded, as
 * a resumed one. How it ended unknown: 503 execution-result-unavailable with
 * Retry-After, not execution-result-gone's 410 (which a Standard Webhooks sender takes
 * as "disable this endpoint"); the key is given back with the execution's hint
 * (claims.ts), so the sender's retry resumes that id: its tombstone answers 202, a lost
 * execution runs again (at least once).
 */
function deliveryGone(m: ModeRequest, started: Started, gone: ExecutionGone): FastifyReply {
  if (gone.discarded) return acknowledgeDelivered(m, started);
  const id = started.execution.id;
  const detail = `Execution ${id} is no longer in the store and its end did not reach this gateway; send the delivery again: it resumes that execution, or runs it again if it is lost`;
  const problem = new HttpProblem('HG_ERR_EXECUTION_RESULT_UNAVAILABLE', detail, {
    headers: { 'retry-after': String(RESULT_GONE_RETRY_AFTER_SECONDS) },
    extensions: { executionId: id },
  });
  return replyProblem(m.request, m.reply, problem);
}

async function waitForCompletion(deps: ModeDeps, m: ModeRequest): Promise<FastifyReply> {
  const result = await startAndAwait(deps, m, ['completed', 'failed']);
  if ('answered' in result) return result.answered;
  const { event } = result;
  return event.type === 'completed'
    ? sendBody(m, successStatus(m.route), event.output, {})
    : m.reply;
}

async function waitForResponseNode(deps: ModeDeps, m: ModeRequest): Promise<FastifyReply> {
  const result = await startAndAwait(deps, m, ['respond', 'completed', 'failed']);
  if ('answered' in result) return result.answered;
  const { event, started } = result;
  if (event.type === 'completed') {
    const message = 'The workflow finished without running a respond node';
    return replyProblem(m.request, m.reply, failureProblem(started, { message }));
  }
  if (event.type !== 'respond') return m.reply;
  const configured = m.route.spec.response.statusCode;
  const status = configured === 204 ? 204 : event.response.statusCode;
  if (!isFinalStatus(status)) {
    // A 1xx is an interim answer: the caller would wait on for a final one that never
    // comes, and a 101 tells a proxy in front (an Ingress) that the connection is now a
    // tunnel to the gateway, past the proxy's own rules.
    const message = `The respond node set status ${String(status)}, which is not a final HTTP status (200 to 599)`;
    return replyProblem(m.request, m.reply, failureProblem(started, { message }));
  }
  return sendBody(m, status, event.response.body, event.response.headers);
}

/** A status that can end an HTTP exchange: 200 to 599 (never 1xx). */
function isFinalStatus(status: unknown): status is number {
  return Number.isInteger(status) && (status as number) >= 200 && (status as number) <= 599;
}

/** Send a workflow-produced body rendered in the configured content type. 204 sends nothing. */
function sendBody(
  m: ModeRequest,
  status: number,
  body: unknown,
  headers: Record<string, string>,
): FastifyReply {
  m.reply.code(status);
  for (const [name, value] of Object.entries(headers)) setAuthorHeader(m.reply, name, value);
  if (status === 204 || status === 304) return m.reply.send();
  const contentType = m.route.spec.response.contentType;
  return m.reply.type(contentType).send(renderBody(contentType, body));
}

/**
 * SSE Stream: the stream's slot is taken before the execution starts, so a process with
 * its streams open refuses (503 streams-exhausted) without running anything. The slot is
 * the execution's too (its id is chosen before the start, webhook-routes.ts): this
 * stream counts toward the execution's cap on this listener like its links' channels. A
 * new execution has no other stream yet; one resumed under an Idempotency-Key whose
 * streams are all open is refused 429 execution-streams-exceeded, nothing started (the
 * key is given back with its hint).
 */
async function sseStream(deps: ModeDeps, m: ModeRequest): Promise<FastifyReply> {
  const slot = takeStreamSlot(m.request, m.ctx.executionId);
  let started: Started;
  try {
    started = await start(deps, m, watching(m));
  } catch (error) {
    slot.release();
    throw error;
  }
  if (started.discarded) {
    slot.release();
    return acknowledgeDelivered(m, started);
  }
  const { execution, links } = started;
  let unsubscribe: (() => void) | undefined;
  let timer: NodeJS.Timeout | undefined;
  const { sse, body } = openSse(m.request, m.reply, {
    slot,
    ...(deps.heartbeatMs ? { heartbeatMs: deps.heartbeatMs } : {}),
    onEnd: () => {
      clearTimeout(timer);
      unsubscribe?.();
    },
  });
  unsubscribe = pipeExecution(deps.engine, execution.id, 0, sse);
  if (!sse.ended) {
    timer = setTimeout(() => {
      sse.send('timeout', { executionId: execution.id, timeout: m.route.spec.timeout, links });
      sse.end();
    }, parseDuration(m.route.spec.timeout));
  }
  return m.reply.code(200).header('location', links.self).send(body);
}
