// The live event stream: per webhook path, an SSE feed of `connected`, `request` and
// `response` events, as the spec's Live Event Stream panel shows them.
// Served at /webhook-events/<workflowId>/<pathSegment>. Secrets never leave: auth
// headers and cookies are redacted, bodies are summarised and size-capped.
import { EventEmitter } from 'node:events';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { HttpProblem } from '../errors.ts';
import type { RouteRecord } from '../../api/records/records.ts';
import { pathOf } from './route-table.ts';
import { openSse } from './sse.ts';

export interface LiveRequestEvent {
  requestId: string;
  correlationId: string;
  at: string;
  method: string;
  path: string;
  route: string;
  headers: Record<string, string>;
  query: string;
}

export interface LiveResponseEvent {
  requestId: string;
  correlationId: string;
  at: string;
  method: string;
  path: string;
  statusCode: number;
  latencyMs: number;
  consumer?: string;
  executionId?: string;
  problem?: string;
}

const REDACTED_HEADERS = new Set(['authorization', 'proxy-authorization', 'cookie', 'x-api-key']);

/** Headers safe to show: credentials (including the route's API key header) masked. */
export function redactHeaders(
  headers: Record<string, unknown>,
  extraSecret?: string,
): Record<string, string> {
  const out: Record<string, string> = {};
  const extra = extraSecret?.toLowerCase();
  // for…in, not Object.entries: this runs for every webhook request (the trigger output).
  for (const name in headers) {
    if (!Object.hasOwn(headers, name)) continue;
    const value = headers[name];
    if (value === undefined) continue;
    const secret = REDACTED_HEADERS.has(name) || name === extra;
    out[name] = secret ? '[redacted]' : Array.isArray(value) ? value.join(', ') : headerText(value);
  }
  return out;
}

function headerText(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

export class LiveEventHub {
  readonly #emitter = new EventEmitter();

  constructor() {
    this.#emitter.setMaxListeners(0);
  }

  publishRequest(
    route: RouteRecord,
    request: FastifyRequest,
    ctx: { requestId: string; correlationId: string; arrivedAt: number },
  ): void {
    if (this.#emitter.listenerCount(route.key) === 0) return;
    const path = pathOf(request.url);
    const event: LiveRequestEvent = {
      requestId: ctx.requestId,
      correlationId: ctx.correlationId,
      at: new Date(ctx.arrivedAt).toISOString(),
      method: request.method,
      path,
      route: route.path,
      headers: redactHeaders(request.headers, route.spec.auth?.apiKey?.header),
      query: request.url.slice(path.length + 1),
    };
    this.#emitter.emit(route.key, 'request', event);
  }

  publishResponse(
    route: RouteRecord,
    statusCode: number,
    durationSeconds: number,
    ctx: {
      requestId: string;
      correlationId: string;
      consumer?: string;
      executionId?: string;
      problem?: string;
    },
    request?: { method: string; url: string },
  ): void {
    if (this.#emitter.listenerCount(route.key) === 0) return;
    const event: LiveResponseEvent = {
      requestId: ctx.requestId,
      correlationId: ctx.correlationId,
      at: new Date().toISOString(),
      method: request?.method ?? '',
      path: request ? pathOf(request.url) : route.path,
      statusCode,
      latencyMs: Math.round(durationSeconds * 1e6) / 1e3,
      ...(ctx.consumer !== undefined ? { consumer: ctx.consumer } : {}),
      ...(ctx.executionId ? { executionId: ctx.executionId } : {}),
      ...(ctx.problem ? { problem: ctx.problem } : {}),
    };
    this.#emitter.emit(route.key, 'response', event);
  }

  subscribe(routeKey: string, listener: (kind: string, data: object) => void): () => void {
    this.#emitter.on(routeKey, listener);
    return () => this.#emitter.off(routeKey, listener);
  }
}

export interface LiveRoutesOptions {
  hub: LiveEventHub;
  /** Find the route for /webhook/<workflowId>/<pathSegment>. */
  findRoute: (path: string) => RouteRecord | undefined;
  heartbeatMs?: number;
}

/** GET /webhook-events/<workflowId>/<pathSegment>: the live SSE stream of one endpoint. */
export function liveEventRoutes(app: FastifyInstance, options: LiveRoutesOptions): void {
  app.get('/webhook-events/*', (request, reply) => {
    const rest = (request.params as { '*': string })['*'];
    const path = `/webhook/${rest}`;
    const route = options.findRoute(path);
    if (!route)
      throw new HttpProblem('HG_ERR_ROUTE_NOT_FOUND', `No webhook endpoint is deployed at ${path}`);
    let unsubscribe: (() => void) | undefined;
    const { sse, body } = openSse(request, reply, {
      ...(options.heartbeatMs ? { heartbeatMs: options.heartbeatMs } : {}),
      onEnd: () => unsubscribe?.(),
    });
    sse.send('connected', {
      path: route.path,
      triggerKey: route.key,
      at: new Date().toISOString(),
    });
    unsubscribe = options.hub.subscribe(route.key, (kind, data) => sse.send(kind, data));
    return reply.send(body);
  });
}
