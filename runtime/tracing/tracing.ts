// Distributed tracing, as the data plane sees it: a port with one adapter, the
// OpenTelemetry SDK (otel.ts), which a role loads with a dynamic import only when
// tracing is on (ADR 0040). With tracing off nothing here is made: every caller holds
// `undefined` where a Tracing or a TraceSpan would be, and pays one branch. This module
// imports nothing, so the request path never loads an @opentelemetry module unless
// asked to.
//
// The spans (docs/tracing.md): a SERVER span per webhook request, an execution span per
// attempt (child of the request's span, through the execution record's `trace`, also
// across Redis to a worker), an INTERNAL span per node run, a CLIENT span per outbound
// request (http nodes, callback deliveries), whose context goes out as `traceparent`.

/** A span's W3C Trace Context, as headers (and as kept on an execution record). */
export interface TraceCarrier {
  traceparent: string;
  tracestate?: string;
}

/** A span in progress. Ending it twice is harmless. */
export interface TraceSpan {
  /**
   * The span failed (status ERROR): its description and the error's class. The
   * description is recorded with each URL in it as its origin and `/REDACTED`, cut to
   * 256 characters (redaction.ts recordedMessage).
   */
  fail(message: string, errorType?: string): void;
  end(): void;
  /** This span as the parent of work elsewhere; undefined when its context is not valid. */
  carrier(): TraceCarrier | undefined;
  /** An INTERNAL child: one run of a workflow node. */
  node(nodeId: string, nodeType: string): TraceSpan;
  /** A CLIENT child: one outbound request (an http node's attempt, a callback attempt). */
  outbound(request: OutboundInfo): OutboundSpan;
}

export interface OutboundInfo {
  method: string;
  /** The destination; recorded as its origin and `/REDACTED` (redaction.ts recordedUrl). */
  url: string;
  /** What sends it. */
  purpose: 'http-node' | 'callback';
  /** 1-based attempt of the request (retries are spans of their own). */
  attempt: number;
}

export interface OutboundSpan extends TraceSpan {
  /** The response's status; 4xx and 5xx mark a client span failed. */
  answered(status: number): void;
}

/** What a finished webhook request adds to its span. */
export interface RequestOutcome {
  statusCode: number;
  executionId?: string | undefined;
  /** The catalogue code of a refusal or failure (HG_ERR_...). */
  problem?: string | undefined;
}

export interface RequestSpan {
  /** The span as the parent of the execution the request started. */
  carrier(): TraceCarrier | undefined;
  /** Ends the span with the answer: 5xx sets status ERROR (the server-span rule). */
  finish(outcome: RequestOutcome): void;
  /** Ends the span of a request whose client left before its answer. */
  abandon(): void;
}

export interface RequestInfo {
  method: string;
  /**
   * The route template, e.g. /webhook/shop_production_orders/ingest/:id: the span's name
   * and `http.route`, and its `url.path` with each parameter's value REDACTED (the path
   * as requested is never recorded: a webhook path may carry the caller's token).
   */
  route: string;
  triggerNamespace: string;
  triggerName: string;
  workflowId: string;
  /** When the request arrived (ms since the epoch): the span starts after authentication. */
  startTime: number;
  /**
   * The caller's context, when HOOKGATE_TRACE_CONTEXT trusts this caller; else a new
   * trace. As the gateway accepted it (acceptedTraceContext): a valid version-00
   * `traceparent`, which the adapter reads without checking it again.
   */
  parent?: TraceCarrier | undefined;
}

export interface ExecutionInfo {
  executionId: string;
  workflowId: string;
  triggerKey: string;
  attempt: number;
  /** The span that started the execution (the request's), from the execution record. */
  parent?: TraceCarrier | undefined;
  /** Run by a worker off the queue (a CONSUMER span), or in the process that accepted it. */
  queued: boolean;
}

export interface Tracing {
  request(info: RequestInfo): RequestSpan;
  execution(info: ExecutionInfo): TraceSpan;
  /**
   * Exports what is buffered and stops; gives up after `deadlineMs` (an unreachable
   * collector never holds the exit).
   */
  shutdown(deadlineMs: number): Promise<void>;
}

/** OTEL_TRACES_SAMPLER values hookgate knows (the specification's, but remote ones). */
export const TRACE_SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;
export type TraceSampler = (typeof TRACE_SAMPLERS)[number];

/**
 * OTEL_TRACES_EXPORTER values hookgate knows, listed (comma-separated) in any number:
 * the specification's, but `zipkin` and the deprecated `logging`. `none` adds no
 * exporter; with nothing else listed, tracing is off.
 */
export const TRACE_EXPORTERS = ['otlp', 'console', 'none'] as const;
export type TraceExporter = (typeof TRACE_EXPORTERS)[number];
/** The exporters that export something: all but `none`. */
export type WorkingTraceExporter = Exclude<TraceExporter, 'none'>;

/**
 * A list of exporters as the roles read OTEL_TRACES_EXPORTER (roles/tracing-settings.ts)
 * and the Pulumi program its `tracingExporters` (infra/plan.ts), the one meaning of both:
 * comma-separated, each name in any case and with blanks around it, counted once; `none`
 * and empty items add nothing, so `none`, `,` or nothing at all is tracing off
 * (`exporters` empty). `exporters`: the working ones, in the order first listed.
 * `problem`: the names hookgate does not know, refused under the name `setting`.
 */
export function readTraceExporters(
  setting: string,
  value: string | undefined,
): { exporters: WorkingTraceExporter[]; problem: string | undefined } {
  const listed = new Set(
    (value ?? '')
      .split(',')
      .map((name) => name.trim().toLowerCase())
      .filter((name) => name !== ''),
  );
  const unknown = [...listed].filter(
    (name) => !(TRACE_EXPORTERS as readonly string[]).includes(name),
  );
  if (unknown.length > 0)
    return {
      exporters: [],
      problem: `${setting} must list otlp, console or none (hookgate exports OTLP, or spans as log lines), not ${unknown.map((name) => `"${name}"`).join(', ')}`,
    };
  return {
    exporters: [...listed].filter((name): name is WorkingTraceExporter => name !== 'none'),
    problem: undefined,
  };
}

/**
 * OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL values hookgate exports with: OTLP over HTTP, in
 * binary protobuf (the specification's default, which every OTLP/HTTP receiver takes) or
 * in JSON, both to a collector's OTLP/HTTP port (4318); or OTLP over gRPC (`grpc`), to its
 * gRPC port (4317). Each with the official exporter package for it (ADR 0040).
 */
export const OTLP_PROTOCOLS = ['http/protobuf', 'http/json', 'grpc'] as const;
export type OtlpProtocol = (typeof OTLP_PROTOCOLS)[number];
/** With neither variable set: the specification's default (ADR 0040, amended 2026-11-28 (day)). */
export const DEFAULT_OTLP_PROTOCOL: OtlpProtocol = 'http/protobuf';

/**
 * An OTLP protocol as the roles read OTEL_EXPORTER_OTLP_TRACES_PROTOCOL and
 * OTEL_EXPORTER_OTLP_PROTOCOL, and the Pulumi program its `tracingProtocol`: in any case,
 * blanks around ignored. `protocol`: undefined when the value is unset or blank (the next
 * variable, else the default, applies). `problem`: a name hookgate does not know, refused
 * under the name `setting`.
 */
export function readOtlpProtocol(
  setting: string,
  value: string | undefined,
): { protocol: OtlpProtocol | undefined; problem: string | undefined } {
  const name = (value ?? '').trim().toLowerCase();
  if (name === '') return { protocol: undefined, problem: undefined };
  if ((OTLP_PROTOCOLS as readonly string[]).includes(name))
    return { protocol: name as OtlpProtocol, problem: undefined };
  return {
    protocol: undefined,
    problem: `${setting} must be http/protobuf, http/json or grpc, not "${value?.trim()}"`,
  };
}

/**
 * A finished span as the console exporter gives it to the role's log: one log line
 * each, the span as its `span` field (JSON, like the line).
 */
export interface LoggedSpan {
  traceId: string;
  spanId: string;
  /** Absent for the root of a trace. */
  parentSpanId?: string;
  name: string;
  kind: 'INTERNAL' | 'SERVER' | 'CLIENT' | 'PRODUCER' | 'CONSUMER';
  /** When it started: ISO 8601, UTC, in milliseconds. */
  startTime: string;
  /** To the microsecond. */
  durationMs: number;
  status: 'UNSET' | 'OK' | 'ERROR';
  statusMessage?: string;
  attributes: Record<string, unknown>;
  /** The resource's service.name. */
  service: string;
}

/** What the OpenTelemetry adapter is made with (roles/tracing-settings.ts reads it). */
export interface TracingConfig {
  /** service.name of every span (OTEL_SERVICE_NAME; default hookgate-<role>). */
  serviceName: string;
  /**
   * Where OTLP goes; undefined: no OTLP export (OTEL_TRACES_EXPORTER lists no `otlp`).
   * OTLP/HTTP: the traces URL, e.g. http://collector:4318/v1/traces. grpc: the
   * collector's address with the scheme that decides its transport, e.g.
   * http://collector:4317 (plaintext) or https://collector:4317 (TLS), no path.
   */
  endpoint: string | undefined;
  /**
   * The encoding of the OTLP export (OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL): the exporter
   * package loaded for it. Read only with `endpoint`; the default otherwise.
   */
  protocol: OtlpProtocol;
  /** Spans as log lines too (OTEL_TRACES_EXPORTER lists `console`), through `logSpan`. */
  console: boolean;
  sampler: TraceSampler;
  /** The ratio of the traceidratio samplers (OTEL_TRACES_SAMPLER_ARG), 0 to 1. */
  ratio: number;
  /** The batch span processor (OTEL_BSP_*): spans kept at most while waiting for export. */
  maxQueueSize: number;
  maxExportBatchSize: number;
  scheduledDelayMs: number;
  exportTimeoutMs: number;
  /** Told of a failed export (a collector away): at most once a minute. */
  onExportError?: (error: Error) => void;
  /** Where the console exporter's spans go (the role's log); needed with `console`. */
  logSpan?: (span: LoggedSpan) => void;
}
