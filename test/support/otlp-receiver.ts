// An OTLP/HTTP traces receiver on loopback, as a collector's: takes the exporters'
// export requests (POST /v1/traces, an ExportTraceServiceRequest) in both encodings of
// OTLP/HTTP, JSON (application/json: ids as hex, attributes as key/value lists) and
// binary protobuf (application/x-protobuf), and keeps every span, flattened. Protobuf is
// decoded by protobufjs with the OTLP schema's field numbers (otlp-schema.ts), not by the
// exporters' own code: a request the schema does not read is a 400.
// Any other content type is refused with 415, so a test notices an exporter that changed.
import { createServer } from 'node:http';
import { exportTraceServiceRequest } from './otlp-schema.ts';

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  name: string;
  /** SPAN_KIND_*: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  /** 0 unset, 1 ok, 2 error. */
  status: { code: number; message?: string };
  attributes: Record<string, unknown>;
  /** The resource's attributes (service.name). */
  resource: Record<string, unknown>;
}

export const SPAN_KIND = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const;
export const STATUS = { unset: 0, ok: 1, error: 2 } as const;

interface AnyValue {
  stringValue?: string;
  intValue?: number | string;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: AnyValue[] };
}

function valueOf(v: AnyValue | undefined): unknown {
  if (v === undefined) return undefined;
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.arrayValue !== undefined) return (v.arrayValue.values ?? []).map(valueOf);
  return undefined;
}

function attributesOf(list: { key: string; value?: AnyValue }[] | undefined) {
  return Object.fromEntries((list ?? []).map((a) => [a.key, valueOf(a.value)]));
}

interface ExportRequest {
  resourceSpans?: {
    resource?: { attributes?: { key: string; value?: AnyValue }[] };
    scopeSpans?: {
      spans?: {
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind: number;
        status?: { code?: number; message?: string };
        attributes?: { key: string; value?: AnyValue }[];
      }[];
    }[];
  }[];
}

const hex = (base64: unknown) =>
  typeof base64 === 'string' ? Buffer.from(base64, 'base64').toString('hex') : undefined;

/**
 * A binary protobuf export request in the JSON encoding's shape: the schema's field
 * names in camelCase (as the JSON encoding writes them), 64-bit integers as strings,
 * trace and span ids in hex (protobufjs gives bytes as base64).
 */
export function decodeProtobufExport(body: Uint8Array): ExportRequest {
  const request = exportTraceServiceRequest.toObject(exportTraceServiceRequest.decode(body), {
    longs: String,
    enums: Number,
    bytes: String,
  }) as ExportRequest;
  for (const rs of request.resourceSpans ?? [])
    for (const ss of rs.scopeSpans ?? [])
      for (const s of ss.spans ?? []) {
        s.traceId = hex(s.traceId) ?? '';
        s.spanId = hex(s.spanId) ?? '';
        const parent = hex(s.parentSpanId);
        if (parent === undefined) delete s.parentSpanId;
        else s.parentSpanId = parent;
      }
  return request;
}

/** The spans of one export request, flattened. */
export function decodeExport(request: ExportRequest): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const rs of request.resourceSpans ?? []) {
    const resource = attributesOf(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? [])
      for (const s of ss.spans ?? [])
        spans.push({
          traceId: s.traceId,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId ?? '',
          name: s.name,
          kind: s.kind,
          status: {
            code: s.status?.code ?? 0,
            ...(s.status?.message ? { message: s.status.message } : {}),
          },
          attributes: attributesOf(s.attributes),
          resource,
        });
  }
  return spans;
}

export interface OtlpReceiver {
  url: string;
  /** The traces endpoint (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT). */
  endpoint: string;
  spans: ReceivedSpan[];
  /** Export requests received (content types). */
  requests: string[];
  /** The encoding of each span received, in the order of `spans`. */
  encodings: ('json' | 'protobuf')[];
  close(): Promise<void>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const requests: string[] = [];
  const encodings: ('json' | 'protobuf')[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const type = req.headers['content-type'] ?? '';
      requests.push(type);
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      const encoding = type.startsWith('application/json')
        ? 'json'
        : type.startsWith('application/x-protobuf')
          ? 'protobuf'
          : undefined;
      if (encoding === undefined) {
        res.writeHead(415).end();
        return;
      }
      const body = Buffer.concat(chunks);
      let received: ReceivedSpan[];
      try {
        received = decodeExport(
          encoding === 'json'
            ? (JSON.parse(body.toString('utf8')) as ExportRequest)
            : decodeProtobufExport(body),
        );
      } catch {
        res.writeHead(400).end();
        return;
      }
      spans.push(...received);
      encodings.push(...received.map(() => encoding));
      // An empty ExportTraceServiceResponse, in the request's encoding.
      if (encoding === 'json') res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      else res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return {
    url,
    endpoint: `${url}/v1/traces`,
    spans,
    requests,
    encodings,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
