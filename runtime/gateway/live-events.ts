// The live event stream: per webhook path, an SSE feed of `connected`, `request` and
// `response` events, as the spec's Live Event Stream panel shows them.
// Served at /webhook-events/<workflowId>/<pathSegment>. Secrets never leave: auth
// headers and cookies are redacted, bodies are summarised and size-capped.
//
// In one process the hub is an EventEmitter. With several gateways a LiveEventBus
// (live-events-redis.ts) carries events between them, so a subscriber on any gateway
// sees the traffic of all: each event names its `gateway` and carries that gateway's
// `seq` (1, 2, 3 ... per gateway, in order). Nothing is built or sent for a route that
// nobody, anywhere, is watching.
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { HttpProblem } from '../errors.ts';
import type { RouteRecord } from '../../api/records/records.ts';
import { pathOf } from './route-table.ts';
import { openSse } from './sse.ts';
import { redactCallbackQuery, redactCallbackUrl } from './callback-url.ts';

/** Which gateway saw the request, and its position in that gateway's stream. */
export interface LiveEventOrigin {
  gateway: string;
  seq: number;
}

export interface LiveRequestEvent extends Partial<LiveEventOrigin> {
  requestId: string;
  correlationId: string;
  at: string;
  method: string;
  path: string;
  route: string;
  headers: Record<string, string>;
  query: string;
}

export interface LiveResponseEvent extends Partial<LiveEventOrigin> {
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

/**
 * Headers safe to show: credentials (including the route's API key header, and the
 * header its saved test key is sent in: `otherSecret`) masked.
 */
export function redactHeaders(
  headers: Record<string, unknown>,
  extraSecret?: string,
  otherSecret?: string,
): Record<string, string> {
  const out: Record<string, string> = {};
  const extra = extraSecret?.toLowerCase();
  const other = otherSecret?.toLowerCase();
  // for…in, not Object.entries: this runs for every webhook request (the trigger output).
  for (const name in headers) {
    if (!Object.hasOwn(headers, name)) continue;
    const value = headers[name];
    if (value === undefined) continue;
    const secret = REDACTED_HEADERS.has(name) || name === extra || name === other;
    out[name] = secret ? '[redacted]' : Array.isArray(value) ? value.join(', ') : headerText(value);
  }
  return out;
}

/**
 * The header Send Test Request sends a route's saved API key in, when the CRD let it
 * differ from auth.apiKey.header (the gateway then refuses it with 401, and the live
 * stream, which shows refused requests, would show the key).
 */
export function testKeyHeader(route: RouteRecord): string | undefined {
  const saved = route.spec.testCredentials;
  return saved?.type === 'apiKey' ? saved.header : undefined;
}

function headerText(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** A gateway id for events: the host name (the pod's name) and a random suffix. */
export function newGatewayId(): string {
  return `${hostname()}-${randomBytes(4).toString('hex')}`;
}

export type LiveListener = (kind: string, data: object) => void;

/** Carries live events between gateways (the port; live-events-redis.ts adapts Redis). */
export interface LiveEventBus {
  /** Whether a subscriber on another gateway watches this route: a local lookup. */
  wanted(routeKey: string): boolean;
  /** Send one event to the other gateways (fire and forget, in order). */
  publish(routeKey: string, kind: string, event: object): void;
  /** Deliver the other gateways' events of this route until the returned function runs. */
  watch(routeKey: string, deliver: LiveListener): () => void;
}

export interface LiveEventHubOptions {
  /** This gateway's id, in every event (default: a random one). */
  gateway?: string;
  bus?: LiveEventBus;
}

export class LiveEventHub {
  readonly #emitter = new EventEmitter();
  readonly #bus: LiveEventBus | undefined;
  readonly #unwatch = new Map<string, () => void>();
  readonly gateway: string;
  #seq = 0;

  constructor(options: LiveEventHubOptions = {}) {
    this.#emitter.setMaxListeners(0);
    this.#bus = options.bus;
    this.gateway = options.gateway ?? newGatewayId();
  }

  /** Someone here or on another gateway watches this route. */
  #watched(routeKey: string): boolean {
    return this.#emitter.listenerCount(routeKey) > 0 || (this.#bus?.wanted(routeKey) ?? false);
  }

  #emit(routeKey: string, kind: string, event: LiveRequestEvent | LiveResponseEvent): void {
    event.gateway = this.gateway;
    event.seq = ++this.#seq;
    this.#emitter.emit(routeKey, kind, event);
    if (this.#bus?.wanted(routeKey)) this.#bus.publish(routeKey, kind, event);
  }

  publishRequest(
    route: RouteRecord,
    request: FastifyRequest,
    ctx: { requestId: string; correlationId: string; arrivedAt: number },
  ): void {
    if (!this.#watched(route.key)) return;
    const path = pathOf(request.url);
    const event: LiveRequestEvent = {
      requestId: ctx.requestId,
      correlationId: ctx.correlationId,
      at: new Date(ctx.arrivedAt).toISOString(),
      method: request.method,
      path,
      route: route.path,
      headers: redactHeaders(
        request.headers,
        route.spec.auth?.apiKey?.header,
        testKeyHeader(route),
      ),
      query: redactCallbackQuery(route, request.url.slice(path.length + 1)),
    };
    redactCallbackUrl(route, event.headers);
    this.#emit(route.key, 'request', event);
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
    if (!this.#watched(route.key)) return;
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
    this.#emit(route.key, 'response', event);
  }

  subscribe(routeKey: string, listener: LiveListener): () => void {
    this.#emitter.on(routeKey, listener);
    if (this.#bus && !this.#unwatch.has(routeKey)) {
      this.#unwatch.set(
        routeKey,
        this.#bus.watch(routeKey, (kind, data) => this.#emitter.emit(routeKey, kind, data)),
      );
    }
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.#emitter.off(routeKey, listener);
      if (this.#emitter.listenerCount(routeKey) > 0) return;
      this.#unwatch.get(routeKey)?.();
      this.#unwatch.delete(routeKey);
    };
  }
}

export interface LiveRoutesOptions {
  hub: LiveEventHub;
  /** Find the route for /webhook/<workflowId>/<pathSegment>. */
  findRoute: (path: string) => RouteRecord | undefined;
  heartbeatMs?: number;
  /** Throws unless the request may watch this route (the admin listener's access check). */
  authorize?: (request: FastifyRequest, route: RouteRecord) => Promise<void>;
  /**
   * Keeps checking that access while the stream is open; calls `revoked` once when it
   * is withdrawn. Returns the stop function.
   */
  recheck?: (
    request: FastifyRequest,
    route: RouteRecord,
    revoked: (problem: HttpProblem) => void,
  ) => () => void;
}

/** GET /webhook-events/<workflowId>/<pathSegment>: the live SSE stream of one endpoint. */
export function liveEventRoutes(app: FastifyInstance, options: LiveRoutesOptions): void {
  app.get('/webhook-events/*', async (request, reply) => {
    const rest = (request.params as { '*': string })['*'];
    const path = `/webhook/${rest}`;
    const route = options.findRoute(path);
    if (!route)
      throw new HttpProblem('HG_ERR_ROUTE_NOT_FOUND', `No webhook endpoint is deployed at ${path}`);
    await options.authorize?.(request, route);
    let unsubscribe: (() => void) | undefined;
    const { recheck } = options;
    const { sse, body } = openSse(request, reply, {
      ...(options.heartbeatMs ? { heartbeatMs: options.heartbeatMs } : {}),
      onEnd: () => unsubscribe?.(),
      ...(recheck ? { recheck: (revoked) => recheck(request, route, revoked) } : {}),
    });
    sse.send('connected', {
      path: route.path,
      triggerKey: route.key,
      gateway: options.hub.gateway,
      at: new Date().toISOString(),
    });
    unsubscribe = options.hub.subscribe(route.key, (kind, data) => sse.send(kind, data));
    return reply.send(body);
  });
}
