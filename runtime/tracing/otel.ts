// The OpenTelemetry adapter of the tracing port (tracing.ts): the official SDK's
// TracerProvider with a bounded batch span processor per exporter: the OTLP exporter of
// the protocol asked for (OTLP/HTTP in protobuf or JSON, or OTLP/gRPC, each its own
// package, imported only when chosen), and/or one of ours that hands each span to the
// role's log (console).
// Loaded by a role with a dynamic import, only when tracing is on: nothing imports
// this module statically (test/tracing/process.test.ts checks it).
//
// No global provider, context manager or propagator is registered: every span gets its
// parent explicitly (a request's span, the execution record's `trace`, the node's
// span), so no AsyncLocalStorage runs on any path, and nothing else in the process
// (a library's own instrumentation) picks up our provider.
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  defaultTextMapGetter,
  defaultTextMapSetter,
  trace,
  type Attributes,
  type Context,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import {
  ExportResultCode,
  hrTimeToMicroseconds,
  hrTimeToMilliseconds,
  TraceState,
  W3CTraceContextPropagator,
  type ExportResult,
} from '@opentelemetry/core';
import {
  detectResources,
  resourceAttributesEnvDetector,
  resourceFromAttributes,
  serviceNameEnvDetector,
} from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type ReadableSpan,
  type Sampler,
  type SpanExporter,
} from '@opentelemetry/sdk-trace';
import {
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_REQUEST_RESEND_COUNT,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  ATTR_SERVICE_NAME,
  ATTR_URL_FULL,
  ATTR_URL_PATH,
  ATTR_URL_SCHEME,
} from '@opentelemetry/semantic-conventions';
import type {
  ExecutionInfo,
  LoggedSpan,
  OutboundInfo,
  OutboundSpan,
  RequestInfo,
  RequestOutcome,
  RequestSpan,
  TraceCarrier,
  TraceSpan,
  Tracing,
  TracingConfig,
} from './tracing.ts';
import { recordedMessage, recordedPath, recordedUrl } from './redaction.ts';

/** hookgate's own attributes (no semantic convention names these). */
export const HOOKGATE_ATTRIBUTES = {
  executionId: 'hookgate.execution.id',
  attempt: 'hookgate.execution.attempt',
  workflowId: 'hookgate.workflow.id',
  triggerKey: 'hookgate.trigger.key',
  triggerNamespace: 'hookgate.trigger.namespace',
  triggerName: 'hookgate.trigger.name',
  nodeId: 'hookgate.node.id',
  nodeType: 'hookgate.node.type',
  purpose: 'hookgate.outbound.purpose',
  problem: 'hookgate.problem',
} as const;

const INSTRUMENTATION = 'hookgate';
/** A failed export is reported at most this often. */
const EXPORT_ERROR_EVERY_MS = 60_000;

const propagator = new W3CTraceContextPropagator();

/**
 * The context whose span is the carrier's (a remote parent: an execution record's
 * `trace`, written by a gateway); ROOT_CONTEXT without one.
 */
function contextOf(carrier: TraceCarrier | undefined): Context {
  if (carrier === undefined) return ROOT_CONTEXT;
  return propagator.extract(ROOT_CONTEXT, carrier, defaultTextMapGetter);
}

/**
 * The context of a caller's span, from its context as the gateway accepted it
 * (RequestInfo.parent: a version-00 `traceparent` already checked, a checked
 * `tracestate`): its fields are read where they stand, not parsed a second time.
 */
function callerContextOf(parent: TraceCarrier | undefined): Context {
  if (parent === undefined) return ROOT_CONTEXT;
  const { traceparent, tracestate } = parent;
  return trace.setSpanContext(ROOT_CONTEXT, {
    traceId: traceparent.slice(3, 35),
    spanId: traceparent.slice(36, 52),
    traceFlags: Number.parseInt(traceparent.slice(53, 55), 16),
    isRemote: true,
    ...(tracestate === undefined ? {} : { traceState: new TraceState(tracestate) }),
  });
}

function carrierOf(span: Span): TraceCarrier | undefined {
  if (!trace.isSpanContextValid(span.spanContext())) return undefined;
  const out: Record<string, string> = {};
  propagator.inject(trace.setSpan(ROOT_CONTEXT, span), out, defaultTextMapSetter);
  const { traceparent, tracestate } = out;
  if (traceparent === undefined) return undefined;
  return tracestate === undefined ? { traceparent } : { traceparent, tracestate };
}

function samplerOf(config: TracingConfig): Sampler {
  const ratio = () => new TraceIdRatioBasedSampler(config.ratio);
  switch (config.sampler) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return ratio();
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: ratio() });
  }
}

/** The exporter, telling the role of failed exports (rate-limited): a collector away is a log line, not a crash. */
function reporting(exporter: SpanExporter, onError: TracingConfig['onExportError']): SpanExporter {
  if (!onError) return exporter;
  let lastReport = -Infinity;
  return exportingBy(exporter, (spans, done) =>
    exporter.export(spans, (result) => {
      if (
        result.code !== ExportResultCode.SUCCESS &&
        Date.now() - lastReport > EXPORT_ERROR_EVERY_MS
      ) {
        lastReport = Date.now();
        onError(result.error ?? new Error('export failed'));
      }
      done(result);
    }),
  );
}

/**
 * The exporter, called on a later turn of the event loop: the batch processor exports a
 * batch that fills up from inside the span's end() (a request's onResponse hook), which
 * must not serialise and send (OTLP) or format and write (console) a batch of spans.
 */
function onLaterTurn(exporter: SpanExporter): SpanExporter {
  return exportingBy(exporter, (spans, done) => setImmediate(() => exporter.export(spans, done)));
}

/** `exporter` with its export() replaced by `exportSpans`; shutdown and flush its own. */
function exportingBy(exporter: SpanExporter, exportSpans: SpanExporter['export']): SpanExporter {
  return {
    export: exportSpans,
    shutdown: () => exporter.shutdown(),
    ...(exporter.forceFlush
      ? { forceFlush: () => (exporter.forceFlush as () => Promise<void>)() }
      : {}),
  };
}

const KINDS: Record<SpanKind, LoggedSpan['kind']> = {
  [SpanKind.INTERNAL]: 'INTERNAL',
  [SpanKind.SERVER]: 'SERVER',
  [SpanKind.CLIENT]: 'CLIENT',
  [SpanKind.PRODUCER]: 'PRODUCER',
  [SpanKind.CONSUMER]: 'CONSUMER',
};
const STATUSES: Record<SpanStatusCode, LoggedSpan['status']> = {
  [SpanStatusCode.UNSET]: 'UNSET',
  [SpanStatusCode.OK]: 'OK',
  [SpanStatusCode.ERROR]: 'ERROR',
};

/** A finished span as a log line's field: plain JSON (ids in hex, times readable). */
function loggedSpan(span: ReadableSpan): LoggedSpan {
  const { traceId, spanId } = span.spanContext();
  const parent = span.parentSpanContext?.spanId;
  const { code, message } = span.status;
  return {
    traceId,
    spanId,
    ...(parent === undefined ? {} : { parentSpanId: parent }),
    name: span.name,
    kind: KINDS[span.kind],
    startTime: new Date(hrTimeToMilliseconds(span.startTime)).toISOString(),
    durationMs: Math.round(hrTimeToMicroseconds(span.duration)) / 1000,
    status: STATUSES[code],
    ...(message ? { statusMessage: message } : {}),
    attributes: { ...span.attributes },
    service: String(span.resource.attributes[ATTR_SERVICE_NAME]),
  };
}

/**
 * OTEL_TRACES_EXPORTER=console: each span to the role's log (a JSON line through the
 * process's log destination, bounded like every line), not console.dir to stdout,
 * whose writes would interleave with the log's.
 */
function logExporter(logSpan: (span: LoggedSpan) => void): SpanExporter {
  return {
    export(spans: ReadableSpan[], done: (result: ExportResult) => void) {
      for (const span of spans) logSpan(loggedSpan(span));
      done({ code: ExportResultCode.SUCCESS });
    },
    shutdown: () => Promise.resolve(),
    forceFlush: () => Promise.resolve(),
  };
}

/**
 * The destination as recorded: origin only, the path `/REDACTED` (redaction.ts), for
 * every purpose. A callback's URL is the caller's, redacted everywhere else; an http
 * node's is where chat and bot webhooks put their token (/services/T/B/<token>,
 * /bot<token>/sendMessage). The node span above the CLIENT span says which call it was.
 */
function outboundAttributes(info: OutboundInfo): Attributes {
  const attributes: Attributes = {
    [ATTR_HTTP_REQUEST_METHOD]: info.method,
    [HOOKGATE_ATTRIBUTES.purpose]: info.purpose,
  };
  if (info.attempt > 1) attributes[ATTR_HTTP_REQUEST_RESEND_COUNT] = info.attempt - 1;
  const url = URL.parse(info.url);
  // An unparsable URL is refused by the outbound policy; the span says which method.
  if (url === null) return attributes;
  attributes[ATTR_URL_FULL] = recordedUrl(info.url);
  attributes[ATTR_URL_SCHEME] = url.protocol.slice(0, -1);
  attributes[ATTR_SERVER_ADDRESS] = url.hostname;
  attributes[ATTR_SERVER_PORT] = url.port ? Number(url.port) : url.protocol === 'https:' ? 443 : 80;
  return attributes;
}

class OtelSpan implements TraceSpan {
  readonly span: Span;
  readonly #tracer: Tracer;
  #ended = false;

  constructor(tracer: Tracer, span: Span) {
    this.#tracer = tracer;
    this.span = span;
  }

  fail(message: string, errorType = 'error'): void {
    // A failure's message may quote a URL (an http node's, a callback's refused one) or
    // carry the caller's input (a fail node's): URLs as origins, bounded (redaction.ts).
    this.span.setStatus({ code: SpanStatusCode.ERROR, message: recordedMessage(message) });
    this.span.setAttribute(ATTR_ERROR_TYPE, errorType);
  }

  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.span.end();
  }

  carrier(): TraceCarrier | undefined {
    return carrierOf(this.span);
  }

  node(nodeId: string, nodeType: string): TraceSpan {
    const span = this.#tracer.startSpan(
      `${nodeType} ${nodeId}`,
      {
        kind: SpanKind.INTERNAL,
        attributes: {
          [HOOKGATE_ATTRIBUTES.nodeId]: nodeId,
          [HOOKGATE_ATTRIBUTES.nodeType]: nodeType,
        },
      },
      trace.setSpan(ROOT_CONTEXT, this.span),
    );
    return new OtelSpan(this.#tracer, span);
  }

  outbound(info: OutboundInfo): OutboundSpan {
    const span = this.#tracer.startSpan(
      info.method,
      { kind: SpanKind.CLIENT, attributes: outboundAttributes(info) },
      trace.setSpan(ROOT_CONTEXT, this.span),
    );
    return new OtelOutboundSpan(this.#tracer, span);
  }
}

class OtelOutboundSpan extends OtelSpan implements OutboundSpan {
  answered(status: number): void {
    this.span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status);
    // The client-span rule: 4xx and 5xx are errors of the request.
    if (status >= 400) this.fail(`answered ${status}`, String(status));
  }
}

class OtelRequestSpan implements RequestSpan {
  readonly #span: Span;
  #ended = false;

  constructor(span: Span) {
    this.#span = span;
  }

  carrier(): TraceCarrier | undefined {
    return carrierOf(this.#span);
  }

  finish(outcome: RequestOutcome): void {
    if (this.#ended) return;
    this.#ended = true;
    const span = this.#span;
    span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, outcome.statusCode);
    if (outcome.executionId !== undefined)
      span.setAttribute(HOOKGATE_ATTRIBUTES.executionId, outcome.executionId);
    if (outcome.problem !== undefined)
      span.setAttribute(HOOKGATE_ATTRIBUTES.problem, outcome.problem);
    // The server-span rule: only 5xx is an error of the server; a 4xx is the caller's.
    if (outcome.statusCode >= 500) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.problem ?? '' });
      span.setAttribute(ATTR_ERROR_TYPE, String(outcome.statusCode));
    }
    span.end();
  }

  abandon(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#span.setAttribute(ATTR_ERROR_TYPE, 'client_left');
    this.#span.end();
  }
}

/**
 * The OTLP exporter of the protocol: the official package of that transport and
 * encoding, imported now, so that a process loads only the one it exports with. Each
 * reads the variables hookgate leaves to it (OTEL_EXPORTER_OTLP_(TRACES_)HEADERS, as
 * HTTP headers or gRPC metadata; _COMPRESSION; with an https endpoint, _CERTIFICATE and
 * the client's key and certificate). The gRPC one takes the transport from the URL's
 * scheme, which the settings made explicit (http: plaintext, https: TLS).
 */
async function otlpExporter(config: TracingConfig, url: string): Promise<SpanExporter> {
  const options = { url, timeoutMillis: config.exportTimeoutMs };
  switch (config.protocol) {
    case 'http/protobuf': {
      const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-proto');
      return new OTLPTraceExporter(options);
    }
    case 'http/json': {
      const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-http');
      return new OTLPTraceExporter(options);
    }
    case 'grpc': {
      const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-grpc');
      return new OTLPTraceExporter(options);
    }
  }
}

/** The exporters the configuration names: OTLP, the log, or both. */
async function exportersOf(config: TracingConfig): Promise<SpanExporter[]> {
  const exporters: SpanExporter[] = [];
  if (config.endpoint !== undefined) {
    const otlp = await otlpExporter(config, config.endpoint);
    exporters.push(onLaterTurn(reporting(otlp, config.onExportError)));
  }
  if (config.console) {
    if (config.logSpan === undefined) throw new Error('tracing: console needs logSpan');
    exporters.push(onLaterTurn(logExporter(config.logSpan)));
  }
  if (exporters.length === 0) throw new Error('tracing: neither an endpoint nor console');
  return exporters;
}

/**
 * The OpenTelemetry tracing of a process: exports to `config.endpoint` and/or the log
 * until shut down. Each exporter has a batch processor of its own (OTEL_BSP_*), so that
 * a collector away holds up no log line, and a span is never exported on the request path.
 */
export async function createOtelTracing(config: TracingConfig): Promise<Tracing> {
  const processors = (await exportersOf(config)).map(
    (exporter) =>
      new BatchSpanProcessor({
        exporter,
        maxQueueSize: config.maxQueueSize,
        maxExportBatchSize: Math.min(config.maxExportBatchSize, config.maxQueueSize),
        scheduledDelayMillis: config.scheduledDelayMs,
        exportTimeoutMillis: config.exportTimeoutMs,
      }),
  );
  // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win over the role's default name.
  const resource = resourceFromAttributes({ [ATTR_SERVICE_NAME]: config.serviceName }).merge(
    detectResources({ detectors: [resourceAttributesEnvDetector, serviceNameEnvDetector] }),
  );
  const provider = new TracerProvider({
    resource,
    sampler: samplerOf(config),
    spanProcessors: processors,
  });
  const tracer = provider.getTracer(INSTRUMENTATION);

  return {
    request(info: RequestInfo): RequestSpan {
      const span = tracer.startSpan(
        `${info.method} ${info.route}`,
        {
          kind: SpanKind.SERVER,
          startTime: info.startTime,
          attributes: {
            [ATTR_HTTP_REQUEST_METHOD]: info.method,
            [ATTR_HTTP_ROUTE]: info.route,
            [ATTR_URL_PATH]: recordedPath(info.route),
            [HOOKGATE_ATTRIBUTES.triggerNamespace]: info.triggerNamespace,
            [HOOKGATE_ATTRIBUTES.triggerName]: info.triggerName,
            [HOOKGATE_ATTRIBUTES.workflowId]: info.workflowId,
          },
        },
        callerContextOf(info.parent),
      );
      return new OtelRequestSpan(span);
    },

    execution(info: ExecutionInfo): TraceSpan {
      const span = tracer.startSpan(
        `execute ${info.workflowId}`,
        {
          kind: info.queued ? SpanKind.CONSUMER : SpanKind.INTERNAL,
          attributes: {
            [HOOKGATE_ATTRIBUTES.executionId]: info.executionId,
            [HOOKGATE_ATTRIBUTES.workflowId]: info.workflowId,
            [HOOKGATE_ATTRIBUTES.triggerKey]: info.triggerKey,
            [HOOKGATE_ATTRIBUTES.attempt]: info.attempt,
          },
        },
        contextOf(info.parent),
      );
      return new OtelSpan(tracer, span);
    },

    async shutdown(deadlineMs: number): Promise<void> {
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, deadlineMs);
        timer.unref();
      });
      try {
        await Promise.race([provider.shutdown().catch(() => {}), deadline]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}
