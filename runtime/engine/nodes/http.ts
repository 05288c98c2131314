// The http node: one outbound request through the address guard, retried with
// exponential backoff and jitter on network errors, timeouts, 429 and 5xx.
// Output: { status, headers, body } (body parsed when the response is JSON).
import type { WorkflowNode } from '../../../api/v1alpha1/workflow.ts';
import { refusedRequestHeader } from '../../../api/http-node-headers.ts';
import { ExecutionFailure } from '../execution-failure.ts';
import { OutboundRefusedError, shownUrl } from '../outbound/guard.ts';
import {
  OutboundTimeoutError,
  retryableStatus,
  sendOutbound,
  type OutboundRequest,
  type OutboundResponse,
} from '../outbound/request.ts';
import { tracingHeaders, withSpan } from '../outbound/trace-context.ts';
import { AbortedError, backoffDelay, parseDuration, sleep } from '../util.ts';
import {
  runClock,
  runTimeFailure,
  runTimeLeft,
  withinRunTime,
  type NodeContext,
  type Step,
} from './context.ts';
import type { TraceSpan } from '../../tracing/tracing.ts';

export interface HttpNodeOutput {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

/** The http node failed (after its retries); `status` is set when a response came back. */
export class HttpNodeError extends Error {
  readonly status: number | undefined;
  constructor(message: string, status?: number) {
    super(message);
    this.name = 'HttpNodeError';
    this.status = status;
  }
}

/** The http node could not get a response (connection refused, reset, DNS…), after its retries. */
export class HttpNetworkError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'HttpNetworkError';
  }
}

function parseBody(response: OutboundResponse): unknown {
  const text = response.body.toString('utf8');
  const type = response.headers['content-type'] ?? '';
  if (/[/+]json\b/i.test(type)) {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      return text;
    }
  }
  return text;
}

async function buildBody(
  node: WorkflowNode,
  input: unknown,
  ctx: NodeContext,
): Promise<string | undefined> {
  const request = node.request;
  if (!request || request.method === 'GET' || request.method === 'DELETE') {
    return request?.body ? JSON.stringify(await ctx.evaluate(request.body, input)) : undefined;
  }
  const value = request.body ? await ctx.evaluate(request.body, input) : input;
  return value === undefined ? undefined : JSON.stringify(value);
}

/**
 * sendOutbound; with tracing on (a node span), as a CLIENT span of its own per attempt,
 * which the request's traceparent names.
 */
function sendTraced(
  ctx: NodeContext,
  attempt: number,
  own: Record<string, string>,
  request: OutboundRequest,
): Promise<OutboundResponse> {
  // Tracing off: sendOutbound's own promise, no async frame of our own around it.
  if (ctx.span === undefined) return sendOutbound(ctx.outbound, request);
  return sendSpanned(ctx, ctx.span, attempt, own, request);
}

async function sendSpanned(
  ctx: NodeContext,
  parent: TraceSpan,
  attempt: number,
  own: Record<string, string>,
  request: OutboundRequest,
): Promise<OutboundResponse> {
  const span = parent.outbound({
    method: request.method,
    url: request.url,
    purpose: 'http-node',
    attempt,
  });
  try {
    const response = await sendOutbound(ctx.outbound, {
      ...request,
      headers: withSpan(request.headers ?? {}, span, own),
    });
    span.answered(response.status);
    return response;
  } catch (error) {
    span.fail(error instanceof Error ? error.message : String(error), errorType(error));
    throw error;
  } finally {
    span.end();
  }
}

/** The error.type of a request that got no answer. */
function errorType(error: unknown): string {
  if (error instanceof OutboundRefusedError) return 'refused';
  if (error instanceof OutboundTimeoutError) return 'timeout';
  return error instanceof Error ? error.name : 'error';
}

/** A header the node may not set (admission names it: a Workflow admitted before the rule). */
function refuseHeaders(node: WorkflowNode, headers: Record<string, string>): void {
  for (const name of Object.keys(headers)) {
    const refused = refusedRequestHeader(name);
    if (refused) {
      throw new ExecutionFailure(`node '${node.id}': request header '${name}': ${refused}`, {
        nodeId: node.id,
      });
    }
  }
}

/** An attempt's time limit; over the engine's limit, the node fails (as a delay over it does). */
function attemptTimeout(ctx: NodeContext, node: WorkflowNode, timeout: string): number {
  const ms = parseDuration(timeout);
  const max = ctx.limits.maxHttpTimeoutMs;
  if (ms > max) {
    throw new ExecutionFailure(
      `node '${node.id}': request timeout ${timeout} exceeds the limit of ${max} ms`,
      { nodeId: node.id },
    );
  }
  return ms;
}

export async function httpNode(
  ctx: NodeContext,
  node: WorkflowNode,
  input: unknown,
): Promise<Step> {
  return { output: await sendRequest(ctx, node, input) };
}

/**
 * An attempt's error that the next attempt may follow, or thrown when none may: a refusal,
 * a status not retried, shutdown; or an attempt `cut` to the run's time left that ran
 * out: the run fails on that limit, as a delay past it does (no retry policy runs it
 * again), not as the destination's timeout ('timeout').
 */
function retriedError(
  ctx: NodeContext,
  node: WorkflowNode,
  error: unknown,
  attempt: number,
  cut: boolean,
): unknown {
  if (error instanceof OutboundRefusedError || error instanceof HttpNodeError) throw error;
  if (ctx.signal.aborted) throw new AbortedError('engine shut down');
  if (cut && error instanceof OutboundTimeoutError) {
    throw runTimeFailure(ctx, node, `attempt ${attempt}`, ctx.deadline - runClock());
  }
  return error;
}

async function sendRequest(
  ctx: NodeContext,
  node: WorkflowNode,
  input: unknown,
): Promise<HttpNodeOutput> {
  const request = node.request;
  if (!request) throw new Error(`node '${node.id}': an http node needs a request`);
  const method = request.method ?? 'POST';
  const body = await buildBody(node, input, ctx);
  const own = request.headers ?? {};
  refuseHeaders(node, own);
  const headers: Record<string, string> = { ...tracingHeaders(ctx.execution.input, own), ...own };
  const lower = new Set(Object.keys(headers).map((h) => h.toLowerCase()));
  if (body !== undefined && !lower.has('content-type'))
    headers['content-type'] = 'application/json';
  const timeoutMs = attemptTimeout(ctx, node, request.timeout ?? '10s');
  const attempts = 1 + (request.retries ?? 0);
  let last: unknown;
  for (let attempt = 1; attempt <= attempts; attempt++) {
    if (attempt > 1) {
      const wait = backoffDelay(ctx.limits.httpBackoffMs, attempt - 1);
      await sleep(withinRunTime(ctx, node, wait, `the wait before attempt ${attempt}`), ctx.signal);
    }
    // An attempt may not outlast the run: cut to what is left (none left: the node fails).
    const attemptMs = Math.min(timeoutMs, runTimeLeft(ctx, node, `attempt ${attempt}`));
    try {
      const response = await sendTraced(ctx, attempt, own, {
        method,
        url: request.url,
        headers,
        ...(body !== undefined ? { body } : {}),
        timeoutMs: attemptMs,
        protocols: ['http:', 'https:'],
        signal: ctx.signal,
      });
      const output = {
        status: response.status,
        headers: response.headers,
        body: parseBody(response),
      };
      if (response.status < 400) return output;
      // Quoted by scheme and host (shownUrl): the message reaches the record, the trace,
      // a callback and a waiting caller's problem detail; a path or query may hold a key.
      last = new HttpNodeError(
        `${method} ${shownUrl(request.url)} answered ${response.status}`,
        response.status,
      );
      if (!retryableStatus(response.status)) throw last;
    } catch (error) {
      last = retriedError(ctx, node, error, attempt, attemptMs < timeoutMs);
    }
  }
  if (last instanceof HttpNodeError || last instanceof OutboundTimeoutError) throw last;
  throw new HttpNetworkError(last instanceof Error ? last.message : String(last), { cause: last });
}
