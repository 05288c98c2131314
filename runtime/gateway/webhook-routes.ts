// The webhook request path: one wildcard Fastify route over our route table.
//
// Order of checks (each answers with a catalogue problem):
//   route (404) → CORS preflight → method (405) → HTTPS (403) → CORS origin (403)
//   → authentication (401/403; a signed delivery's headers) → rate limit (429)
//   → shared store up (503) → workflow published (404) → body size (413)
//   → signature (401) → body parse (400/415) → input schema (422) → response mode.
// Everything before the body is read happens in onRequest, so an unauthenticated or
// throttled caller never makes the gateway read its body. Signed deliveries
// (auth.method signature) can only be verified once the body is read: the signature
// covers it. What their headers alone can prove (the signature header there and
// well-formed, the signed timestamp within the tolerance) is checked in onRequest with
// authentication, so a delivery without one is refused before its body is read; the
// signature is then checked on the raw bytes before anything parses them (or, for a
// request without a body, before the handler), and the replay claim of a delivery
// answered with an error is released, so that the sender's retry is accepted. A
// delivery keyed by its id is claimed after its idempotency key instead (claims.ts):
// the id is its implicit key, and the sender's retry gets the first answer. Their
// rate limit is counted right after the signature (and the replay check) passed, not
// in onRequest: only verified callers count, as for every other authentication method,
// so unsigned requests cannot spend the sender's limit (ADR 0014, amended 2026-11-28).
import { takeTestRequestMark } from './security/test-request-mark.ts';
import { randomUUID } from 'node:crypto';
import { METHODS } from 'node:http';
import type {
  FastifyContentTypeParser,
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
} from 'fastify';
import type { HttpMethod } from '../../api/v1alpha1/index.ts';
import { HttpProblem } from '../errors.ts';
import type { ExecutionEngine, TriggerOutput } from '../engine/ports.ts';
import {
  acceptedTraceContext,
  type AcceptedTraceContext,
  type TraceContextPolicy,
} from '../engine/outbound/trace-context.ts';
import type { RouteRecord } from '../../api/records/records.ts';
import { inputLimits } from './body/input-limits.ts';
import { checkContentEncoding, parseBody, parseForm, readBodyThen } from './body/parse.ts';
import { isoTime } from './clock.ts';
import type { WebhookContext } from './context.ts';
import {
  claimIdempotencyKey,
  IDEMPOTENCY_HEADER,
  recordIdempotentAnswer,
  releaseIdempotencyKey,
  type IdempotencyOptions,
} from './idempotency/claims.ts';
import { redactHeaders, testKeyHeader, type LiveEventHub } from './live-events.ts';
import { UNMATCHED_ROUTE, type RequestObservation, type RequestObserver } from './observations.ts';
import { toProblem } from './problem-handler.ts';
import { applyResponseHeaders, setHeaders } from './response-headers.ts';
import { respond, type ModeDeps, type ModeRequest } from './response-modes.ts';
import { redactCallbackUrl } from './callback-url.ts';
import { MAX_PARAM_LENGTH, pathOf, type RouteTable } from './route-table.ts';
import type { SignatureCheck } from './security/auth/signature/verify.ts';
import type { SampleRecorder } from '../schema-learning/recorder.ts';
import type { RequestSpan, TraceCarrier, Tracing } from '../tracing/tracing.ts';

/** The protections of the request path. Each throws an HttpProblem to refuse. */
export interface Guards {
  /** Refuse plain HTTP when the route requires HTTPS. */
  https(route: RouteRecord, request: FastifyRequest): void;
  /** Answer a CORS preflight: the headers of the 204, or a thrown 403. */
  preflight(route: RouteRecord, request: FastifyRequest): Record<string, string>;
  /** Check the Origin of an actual request; returns the CORS headers to add. */
  cors(route: RouteRecord, request: FastifyRequest): Record<string, string>;
  /**
   * Synchronous where it can be (none, API keys, a signed delivery's headers): no
   * promise on the hot path.
   */
  authenticate(
    route: RouteRecord,
    request: FastifyRequest,
  ): { consumer?: string } | Promise<{ consumer?: string }>;
  /**
   * Check a signed delivery over its raw body; throws its 401. `deferIdClaim`: a
   * delivery replayed by its id is handed back (SignatureCheck.delivery), not refused.
   */
  verifySignature(
    route: RouteRecord,
    request: FastifyRequest,
    body: Buffer,
    deferIdClaim: boolean,
  ): Promise<SignatureCheck>;
  /** Count the request; returns RateLimit headers, throws 429 when over. */
  rateLimit(route: RouteRecord): Record<string, string> | Promise<Record<string, string>>;
  /** Validate the parsed body against the route's input schema (422). */
  validateInput(route: RouteRecord, body: unknown, contentType?: string): void;
  /**
   * The route left the route table: drop what is kept for it by route key. (What is
   * kept per route record goes with the record; see route-table.ts.)
   */
  removed(route: RouteRecord): void;
}

export interface WebhookRoutesOptions {
  table: RouteTable;
  engine: ExecutionEngine;
  guards: Guards;
  modes?: Partial<ModeDeps>;
  observer?: RequestObserver;
  live?: LiveEventHub;
  /** Largest body any route may accept; each route's own maxBodyBytes is lower. */
  maxBodyBytes?: number;
  /** Idempotency-Key support; without it the header is ignored. */
  idempotency?: IdempotencyOptions;
  /**
   * Throws while the store every execution needs is down (queue mode, circuit breaker
   * open): the request is refused before its body is read.
   */
  storeCheck?: () => void;
  /** Schema learning: records the JSON bodies of triggers that learn (once accepted: started). */
  samples?: SampleRecorder;
  /** Whose W3C trace context goes on to what executions call (default: authenticated). */
  traceContext?: TraceContextPolicy;
  /** Distributed tracing: a SERVER span per matched request (ADR 0040); off when absent. */
  tracing?: Tracing;
}

const CORRELATION_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const EMPTY_BODY = Buffer.alloc(0);
const NOT_COUNTED: Record<string, string> = Object.freeze({});

function isSigned(route: RouteRecord): boolean {
  return route.spec.auth?.method === 'signature';
}

/**
 * Verifies a signed delivery, notes it on the context (consumer, replay claim), then
 * counts it against the endpoint's rate limit: only a verified delivery is counted. A
 * 429 (or 503) here is an error answer, so the replay claim is released (onResponse)
 * and the sender's retry of the same delivery is accepted. With idempotency, a delivery
 * replayed by its id goes on to its key (claims.ts), which takes the replay claim.
 */
function checkSignature(
  guards: Guards,
  request: FastifyRequest,
  body: Buffer,
  deferIdClaim: boolean,
): Promise<void> {
  const ctx = request.webhook as WebhookContext;
  const route = ctx.match.route;
  return guards.verifySignature(route, request, body, deferIdClaim).then((check) => {
    ctx.consumer = check.consumer;
    const signature: NonNullable<WebhookContext['signature']> = check.release
      ? { release: check.release }
      : check.delivery
        ? { delivery: check.delivery }
        : {};
    ctx.signature = signature;
    const limited = guards.rateLimit(route);
    if (!(limited instanceof Promise)) {
      signature.rateLimitHeaders = limited;
      return;
    }
    return limited.then((headers) => {
      signature.rateLimitHeaders = headers;
    });
  });
}

export function webhookRoutes(app: FastifyInstance, options: WebhookRoutesOptions): void {
  const { table, guards, observer, live, tracing } = options;
  const traceContext = options.traceContext ?? 'authenticated';
  const samples = options.samples;
  const modeDeps: ModeDeps = {
    engine: options.engine,
    ...options.modes,
    // Schema learning samples a body once its request is accepted (its execution
    // started): a request refused after the input check is no sample (docs/schemas.md).
    ...(samples
      ? {
          accepted: (m: ModeRequest) =>
            samples.request(m.route, m.input.body, m.request.headers['content-type']),
        }
      : {}),
  };
  const deferIdClaim = options.idempotency !== undefined;
  app.decorateRequest('webhook', null);
  const stopRemovals = table.onRemoved((route) => guards.removed(route));
  app.addHook('onClose', (_instance, done) => {
    stopRemovals();
    done();
  });

  // One parser for every content type: read within the route's limit, then parse.
  // Callback style end to end, like the onRequest hook: no promise per body.
  app.removeAllContentTypeParsers();
  const parser: FastifyContentTypeParser = (request, payload, done) => {
    const limit =
      request.webhook?.match.route.spec.maxBodyBytes ?? options.maxBodyBytes ?? 1024 * 1024;
    try {
      checkContentEncoding(request.headers['content-encoding']);
    } catch (error) {
      done(error as Error, undefined);
      return;
    }
    readBodyThen(payload, limit, request.headers['content-length'], (error, buffer) => {
      if (error || !buffer) {
        done(error, undefined);
        return;
      }
      const ctx = request.webhook;
      if (ctx) ctx.rawBody = buffer;
      if (ctx && isSigned(ctx.match.route)) {
        checkSignature(guards, request, buffer, deferIdClaim).then(
          () => parseInto(request, buffer, done),
          (signatureError: unknown) => done(signatureError as Error, undefined),
        );
        return;
      }
      parseInto(request, buffer, done);
    });
  };
  app.addContentTypeParser('*', parser);
  // The same parser by name for the commonest type: Fastify caches the parser lookup
  // of a named type, but looks the catch-all up again (parsing the header) per request.
  app.addContentTypeParser('application/json', parser);

  // Callback style, so a request that needs nothing asynchronous (no auth, or an API
  // key) pays for no promise: the hot path of every webhook call.
  app.addHook('onRequest', (request, reply, done) => {
    let ctx: WebhookContext;
    // Send Test Request's in-process mark, removed before anything else sees the headers.
    const inProcessTest = takeTestRequestMark(request.headers);
    try {
      ctx = matchRoute(table, request, reply);
      const route = ctx.match.route;
      // Tracing off: this branch is all it costs.
      if (tracing !== undefined) abandonOnClose(tracing, request, reply, ctx);
      applyResponseHeaders(reply, route, ctx);
      live?.publishRequest(route, request, ctx);
      // CORS first, so that every answer to an allowed origin carries its headers (a 405
      // or a 403 https-required included); a refused origin is answered after the method.
      let refusedOrigin: Error | undefined;
      try {
        setHeaders(reply, guards.cors(route, request));
      } catch (error) {
        refusedOrigin = error as Error;
      }
      if (answerOptionsOrRefuseMethod(guards, route, request, reply)) return;
      if (!inProcessTest) guards.https(route, request);
      if (refusedOrigin !== undefined) throw refusedOrigin;
    } catch (error) {
      done(error as Error);
      return;
    }
    const route = ctx.match.route;
    // A signed delivery is counted once its signature is verified (checkSignature).
    const counted = !isSigned(route);
    const afterAuth = (auth: { consumer?: string }) => {
      if (auth.consumer !== undefined) ctx.consumer = auth.consumer;
      return counted ? guards.rateLimit(route) : NOT_COUNTED;
    };
    const finish = (headers: Record<string, string>) => {
      reply.headers(headers);
      try {
        options.storeCheck?.();
      } catch (error) {
        done(error as Error);
        return;
      }
      if (!table.workflow(route.workflowId)) {
        done(
          new HttpProblem(
            'HG_ERR_WORKFLOW_NOT_FOUND',
            `Workflow ${route.workflowId} is not published; the engine cannot find it`,
          ),
        );
        return;
      }
      done();
    };
    try {
      const auth = guards.authenticate(route, request);
      if (auth instanceof Promise) {
        auth.then(afterAuth).then(finish, done);
        return;
      }
      const limited = afterAuth(auth);
      if (limited instanceof Promise) {
        limited.then(finish, done);
        return;
      }
      finish(limited);
    } catch (error) {
      done(error as Error);
    }
  });

  app.route({
    method: webhookMethods(app),
    url: '/webhook/*',
    exposeHeadRoute: false,
    // Not an async function: the response mode's promise is the only one a request
    // without an Idempotency-Key needs (a throw here reaches the error handler alike).
    handler: (request, reply) => {
      const ctx = request.webhook as WebhookContext;
      if (isSigned(ctx.match.route)) {
        // A signed delivery without a body never reached the parser: checked here.
        if (ctx.signature === undefined) {
          return checkSignature(guards, request, EMPTY_BODY, deferIdClaim).then(() => {
            announceSignedCount(reply, ctx);
            return handle(request, reply);
          });
        }
        announceSignedCount(reply, ctx);
      }
      return handle(request, reply);
    },
  });

  const handle = (request: FastifyRequest, reply: FastifyReply) => {
    const ctx = request.webhook as WebhookContext;
    const route = ctx.match.route;
    // Tracing off: this branch is all it costs. Started here, once the caller has been
    // authenticated (the signature of a signed delivery too), so that the policy's
    // 'authenticated' means it: a refused caller never chooses the trace. The caller's
    // context is read once, for the span's parent and the trigger output's metadata.
    // A caller gone before this point has its span already (abandoned): none made twice.
    if (tracing !== undefined) {
      if (request.headers.traceparent !== undefined)
        ctx.callerTrace = callerTraceContext(traceContext, route, request);
      ctx.span ??= requestSpan(tracing, request, ctx, ctx.callerTrace);
    }
    const body = request.body ?? null;
    guards.validateInput(route, body, request.headers['content-type'] ?? '');
    const workflow = table.workflow(route.workflowId);
    if (!workflow) throw new HttpProblem('HG_ERR_WORKFLOW_NOT_FOUND');
    const run = () => {
      ctx.executionId = (ctx.resume ?? ctx.planned)?.executionId ?? randomUUID();
      const input = triggerOutput(request, ctx, body, traceContext);
      return respond(modeDeps, { request, reply, route, workflow, input, ctx });
    };
    const idempotency = options.idempotency;
    // A signed delivery's id is its implicit key (claims.ts), an Idempotency-Key wins.
    if (
      idempotency &&
      (request.headers[IDEMPOTENCY_HEADER] !== undefined || ctx.signature?.delivery !== undefined)
    ) {
      return claimIdempotencyKey(idempotency, request, reply, ctx).then((claimed) =>
        claimed ? run().then((answered) => keepKeyOfLeftClient(idempotency, ctx, answered)) : reply,
      );
    }
    return run();
  };

  // Record every answer, refusals included, for metrics, analytics and the live stream.
  app.addHook('onError', async (request, reply, error) => {
    if (!request.webhook) return;
    request.webhook.problem = toProblem(error).code;
    // A counted signed delivery refused later (its body does not parse, say) still
    // tells the sender where its limit stands.
    announceSignedCount(reply, request.webhook);
    // No execution started (refused before, or by the engine: queue full, shutting
    // down, store down): the key is given back, so the retry the answer asks for runs,
    // and starts the execution this one asked for (claims.ts). Once one has started
    // (its links are made), its answer is the key's, errors too.
    if (options.idempotency && !request.webhook.executionLinks) {
      await releaseIdempotencyKey(options.idempotency, request.webhook);
    }
  });
  if (options.idempotency) {
    const idempotency = options.idempotency;
    app.addHook('onSend', (request, reply, payload, done) => {
      if (!request.webhook?.idempotencyClaim) {
        done(null, payload);
        return;
      }
      recordIdempotentAnswer(idempotency, reply, request.webhook, payload).then(
        () => done(null, payload),
        (error: unknown) => done(error as Error),
      );
    });
  }
  app.addHook('onResponse', (request, reply, done) => {
    done();
    const ctx = request.webhook;
    if (!ctx) {
      observer?.observe(unmatchedObservation(request, reply));
      return;
    }
    // A request answered before the handler (a refusal) gets a span of its own trace.
    if (tracing !== undefined)
      (ctx.span ?? requestSpan(tracing, request, ctx, undefined)).finish({
        statusCode: reply.statusCode,
        executionId: ctx.executionId,
        problem: ctx.problem,
      });
    // A delivery answered with an error was not received: its sender's retry is not a
    // replay. One keyed by its id whose execution started keeps its claim: the key
    // answers the retry (stored answer, or the same execution), the claim still stops a
    // second run should the key be lost.
    if (
      ctx.signature?.release &&
      reply.statusCode >= 400 &&
      !(ctx.signature.delivery && ctx.executionLinks)
    ) {
      ctx.signature.release().catch(() => {});
    }
    const route = ctx.match.route;
    const durationSeconds = Number(process.hrtime.bigint() - ctx.startedAt) / 1e9;
    observer?.observe(observation(request, reply, ctx, durationSeconds));
    live?.publishResponse(route, reply.statusCode, durationSeconds, ctx, request);
  });
}

/** The RateLimit headers of a signed delivery counted after its signature (checkSignature). */
function announceSignedCount(reply: FastifyReply, ctx: WebhookContext): void {
  const headers = ctx.signature?.rateLimitHeaders;
  if (headers !== undefined) reply.headers(headers);
}

/**
 * A waiting caller that left got no answer, so no hook gave its key back: it is given
 * back now with the execution's hint, and the retry waits for (or replays the end of)
 * that same execution instead of running it again once the claim's lease ran out.
 */
async function keepKeyOfLeftClient(
  idempotency: IdempotencyOptions,
  ctx: WebhookContext,
  answered: FastifyReply,
): Promise<FastifyReply> {
  if (ctx.clientLeft && ctx.idempotencyClaim !== undefined) {
    // A store that fails here leaves the claim to its lease (endpoint timeout + 5 s).
    const released = await releaseIdempotencyKey(idempotency, ctx).then(
      () => true,
      () => false,
    );
    // A signed delivery's replay claim too: its sender's retry must reach the key
    // (which now stops a second run), not a 401 'replayed'. (One keyed by its id
    // reaches the key first: its claim stays.)
    if (released && !ctx.signature?.delivery) await ctx.signature?.release?.().catch(() => {});
  }
  return answered;
}

/**
 * Every method Node parses (but CONNECT, refused as a client error): an endpoint path
 * with a method its trigger does not serve is 405 with Allow, whatever the method
 * (TRACE, PROPFIND, ...); routed for a few methods only, the others were 404 not-found
 * on a deployed path. Fastify routes a method once it knows it.
 */
function webhookMethods(app: FastifyInstance): string[] {
  const known = new Set(app.supportedMethods);
  for (const method of METHODS) {
    if (method === 'CONNECT' || known.has(method)) continue;
    app.addHttpMethod(method, { hasBody: true });
  }
  return app.supportedMethods;
}

/** Parses a read body by its Content-Type, within the route's input limits. */
function parseInto(
  request: FastifyRequest,
  buffer: Buffer,
  done: (error: Error | null, body?: unknown) => void,
): void {
  let body: unknown;
  try {
    const limits = inputLimits(request.webhook?.match.route.spec.inputLimits);
    body = parseBody(buffer, request.headers['content-type'], limits);
  } catch (parseError) {
    done(parseError as Error, undefined);
    return;
  }
  done(null, body);
}

/**
 * What a matched request reports. The optional fields are assigned, not spread in:
 * this runs for every request, and spreading builds a throw-away object per field.
 */
function observation(
  request: FastifyRequest,
  reply: FastifyReply,
  ctx: WebhookContext,
  durationSeconds: number,
): RequestObservation {
  const route = ctx.match.route;
  const o: RequestObservation = {
    at: ctx.arrivedAt,
    application: route.application,
    environment: route.environment,
    workflowId: route.workflowId,
    triggerKey: route.key,
    method: request.method,
    route: route.path,
    statusCode: reply.statusCode,
    durationSeconds,
    correlationId: ctx.correlationId,
    requestId: ctx.requestId,
  };
  if (ctx.consumer !== undefined) o.consumer = ctx.consumer;
  if (ctx.problem) o.problem = ctx.problem;
  if (ctx.executionId) o.executionId = ctx.executionId;
  return o;
}

/** A request that matched no route: counted under the route label `unmatched`. */
function unmatchedObservation(request: FastifyRequest, reply: FastifyReply): RequestObservation {
  const requestId = reply.getHeader('x-request-id');
  return {
    at: Date.now() - reply.elapsedTime,
    application: '',
    environment: '',
    workflowId: '',
    triggerKey: '',
    method: request.method,
    route: UNMATCHED_ROUTE,
    statusCode: reply.statusCode,
    durationSeconds: reply.elapsedTime / 1000,
    problem: 'HG_ERR_ROUTE_NOT_FOUND',
    correlationId: '',
    requestId: typeof requestId === 'string' ? requestId : '',
  };
}

/**
 * CORS preflights and methods that are not enabled. Returns true when it has answered
 * (preflight 204, or a bare OPTIONS 204 with Allow where CORS is on); throws 405 for
 * every other method the endpoint does not serve, OPTIONS included where CORS is off:
 * the answer agrees with Allow, which lists OPTIONS only when it is served.
 */
function answerOptionsOrRefuseMethod(
  guards: Guards,
  route: RouteRecord,
  request: FastifyRequest,
  reply: FastifyReply,
): boolean {
  const method = request.method as HttpMethod;
  if (
    method === 'OPTIONS' &&
    request.headers.origin &&
    request.headers['access-control-request-method']
  ) {
    setHeaders(reply, guards.preflight(route, request));
    void reply.code(204).header('allow', allowHeader(route)).send();
    return true;
  }
  if (route.spec.methods.includes(method)) return false;
  if (method === 'OPTIONS' && answersOptions(route)) {
    void reply.code(204).header('allow', allowHeader(route)).send();
    return true;
  }
  throw new HttpProblem('HG_ERR_METHOD_NOT_ALLOWED', `${method} is not enabled for this endpoint`, {
    headers: { allow: allowHeader(route) },
    extensions: { allowed: route.spec.methods },
  });
}

/** Find the route of a request and start its context; 404 when there is none. */
function matchRoute(
  table: RouteTable,
  request: FastifyRequest,
  reply: FastifyReply,
): WebhookContext {
  const path = pathOf(request.url);
  const match = table.match(path);
  const incoming = request.headers['x-correlation-id'];
  const requestId = randomUUID();
  const correlationId =
    typeof incoming === 'string' && CORRELATION_ID.test(incoming) ? incoming : requestId;
  if (!match) {
    reply.header('x-request-id', requestId);
    // The router finds no route for a parameter over its limit: say why (the path
    // itself may be right).
    if (path.split('/').some((segment) => decodedLength(segment) > MAX_PARAM_LENGTH))
      throw new HttpProblem('HG_ERR_URI_TOO_LONG', 'A segment of the URL path is too long.');
    throw new HttpProblem('HG_ERR_ROUTE_NOT_FOUND', `No webhook endpoint is deployed at ${path}`);
  }
  const ctx: WebhookContext = {
    match,
    startedAt: process.hrtime.bigint(),
    arrivedAt: Date.now(),
    requestId,
    correlationId,
  };
  request.webhook = ctx;
  return ctx;
}

/** A path segment's length once percent-decoded, as the router measures parameters. */
function decodedLength(segment: string): number {
  if (segment.length <= MAX_PARAM_LENGTH) return segment.length;
  try {
    return decodeURIComponent(segment).length;
  } catch {
    return segment.length;
  }
}

/** Whether the gateway answers OPTIONS itself (CORS is on: preflights are answered). */
function answersOptions(route: RouteRecord): boolean {
  return route.spec.cors?.enabled === true;
}

/**
 * The Allow header of a route: exactly the methods it serves, i.e. its methods, and
 * OPTIONS when CORS is on (preflights are answered; a bare OPTIONS then gets 204 with
 * this header, as a capability query that starts nothing). Only built for OPTIONS and
 * 405 answers.
 */
function allowHeader(route: RouteRecord): string {
  const extra = answersOptions(route) ? ['OPTIONS'] : [];
  return [...new Set([...route.spec.methods, ...extra])].join(', ');
}

/**
 * A caller that leaves before its answer gets no onResponse (Fastify's runs on
 * 'finish'), and onRequestAbort only while its body was incomplete: a response closed
 * unfinished ends the span here (client_left), whatever the mode or stage.
 */
function abandonOnClose(
  tracing: Tracing,
  request: FastifyRequest,
  reply: FastifyReply,
  ctx: WebhookContext,
): void {
  const res = reply.raw;
  res.once('close', () => {
    if (res.writableFinished) return;
    (ctx.span ??= requestSpan(tracing, request, ctx, undefined)).abandon();
  });
}

/** The caller's trace context the policy accepts, the endpoint's authentication counted. */
function callerTraceContext(
  traceContext: TraceContextPolicy,
  route: RouteRecord,
  request: FastifyRequest,
): AcceptedTraceContext {
  const method = route.spec.auth?.method;
  return acceptedTraceContext(
    traceContext,
    method !== undefined && method !== 'none',
    request.headers,
  );
}

/**
 * The SERVER span of a matched request, from the time it arrived: a child of the
 * caller's context the trace context policy accepted (as for what executions pass on,
 * ADR 0033) once the caller passed the endpoint's authentication, else (`caller`
 * undefined or empty) the root of a new trace.
 */
function requestSpan(
  tracing: Tracing,
  request: FastifyRequest,
  ctx: WebhookContext,
  caller: AcceptedTraceContext | undefined,
): RequestSpan {
  const route = ctx.match.route;
  const parent = caller?.traceparent === undefined ? undefined : (caller as TraceCarrier);
  return tracing.request({
    method: request.method,
    route: route.path,
    triggerNamespace: route.namespace,
    triggerName: route.name,
    workflowId: route.workflowId,
    startTime: Date.now() - Number(process.hrtime.bigint() - ctx.startedAt) / 1e6,
    parent,
  });
}

function triggerOutput(
  request: FastifyRequest,
  ctx: WebhookContext,
  body: unknown,
  traceContext: TraceContextPolicy,
): TriggerOutput {
  const route = ctx.match.route;
  // Credentials never reach the workflow or the stored execution: the authenticated
  // caller is metadata.consumer.
  const headers = redactHeaders(
    request.headers,
    route.spec.auth?.apiKey?.header,
    testKeyHeader(route),
  );
  const path = pathOf(request.url);
  const metadata: TriggerOutput['metadata'] = {
    timestamp: isoTime(ctx.arrivedAt),
    correlationId: ctx.correlationId,
    requestId: ctx.requestId,
    executionId: ctx.executionId as string,
    method: request.method,
    path,
    route: route.path,
    triggerKey: route.key,
    workflowId: route.workflowId,
  };
  // Assigned rather than spread in: no throw-away object per optional field.
  const contentType = request.headers['content-type'];
  if (contentType) metadata.contentType = contentType;
  if (ctx.consumer !== undefined) metadata.consumer = ctx.consumer;
  // Only read when the caller sent one: nothing on the path of a request without. With
  // tracing on, the request span's (ctx.callerTrace) is used: the context is read once.
  if (request.headers.traceparent !== undefined) {
    const accepted = ctx.callerTrace ?? callerTraceContext(traceContext, route, request);
    if (accepted.traceparent !== undefined) metadata.traceparent = accepted.traceparent;
    if (accepted.tracestate !== undefined) metadata.tracestate = accepted.tracestate;
  }
  const query = queryOf(request.url.slice(path.length + 1));
  // An Async Callback's URL is the engine's to deliver to, not the workflow's or the
  // stored record's (docs/callbacks.md): it may carry the receiver's token.
  redactCallbackUrl(route, headers, query);
  return { body, headers, query, params: ctx.match.params, metadata };
}

/**
 * The query string as an object, by the form rules (a repeated key becomes an array of
 * its values; `__proto__` is just a key). Most webhook calls have none: no parser then.
 */
function queryOf(search: string): Record<string, string | string[]> {
  return search === '' ? {} : parseForm(search);
}
