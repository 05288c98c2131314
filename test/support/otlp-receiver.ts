// An OTLP/HTTP traces receiver on loopback, as a collector's: takes the exporter's
// JSON export requests (POST /v1/traces, ExportTraceServiceRequest in the OTLP JSON
// encoding: ids as hex, attributes as key/value lists) and keeps every span, flattened.
// A protobuf request is refused with 415, so a test notices an exporter that changed.
import { createServer } from 'node:http';

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
  close(): Promise<void>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const requests: string[] = [];
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
      if (!type.startsWith('application/json')) {
        res.writeHead(415).end();
        return;
      }
      try {
        spans.push(
          ...decodeExport(JSON.parse(Buffer.concat(chunks).toString('utf8')) as ExportRequest),
        );
      } catch {
        res.writeHead(400).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return {
    url,
    endpoint: `${url}/v1/traces`,
    spans,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
