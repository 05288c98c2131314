// An OTLP/gRPC traces receiver on loopback, as a collector's gRPC port (4317): the
// TraceService's Export method served by @grpc/grpc-js (the gRPC library the exporter
// brings), plaintext or TLS. The method is declared by hand with its path from
// opentelemetry-proto (collector/trace/v1/trace_service.proto) and passes the bytes
// through; the request is decoded with protobufjs and the OTLP schema's field numbers
// (otlp-schema.ts), as the OTLP/HTTP receiver decodes protobuf, not by the exporter's
// own code. A request the schema does not read is answered INVALID_ARGUMENT.
import {
  Server,
  ServerCredentials,
  status,
  type sendUnaryData,
  type ServerUnaryCall,
  type ServiceDefinition,
} from '@grpc/grpc-js';
import { decodeExport, decodeProtobufExport, type OtlpReceiver } from './otlp-receiver.ts';

/** The one method of opentelemetry.proto.collector.trace.v1.TraceService, bytes in and out. */
const bytes = (b: Buffer) => b;
const TRACE_SERVICE: ServiceDefinition = {
  Export: {
    path: '/opentelemetry.proto.collector.trace.v1.TraceService/Export',
    requestStream: false,
    responseStream: false,
    requestSerialize: bytes,
    requestDeserialize: bytes,
    responseSerialize: bytes,
    responseDeserialize: bytes,
  },
};

export interface OtlpGrpcReceiver extends OtlpReceiver {
  /** host:port, for an endpoint without a scheme (OTEL_EXPORTER_OTLP_INSECURE decides). */
  address: string;
  /** The metadata of each export request (OTEL_EXPORTER_OTLP_HEADERS arrive here). */
  metadata: Record<string, string>[];
}

export interface OtlpGrpcReceiverOptions {
  /** Serve TLS with this certificate (PEM), else plaintext. */
  tls?: { cert: string; key: string };
}

export async function startOtlpGrpcReceiver(
  options: OtlpGrpcReceiverOptions = {},
): Promise<OtlpGrpcReceiver> {
  const received: Pick<OtlpGrpcReceiver, 'spans' | 'requests' | 'encodings' | 'metadata'> = {
    spans: [],
    requests: [],
    encodings: [],
    metadata: [],
  };
  const exportSpans = (call: ServerUnaryCall<Buffer, Buffer>, done: sendUnaryData<Buffer>) => {
    // gRPC carries application/grpc by definition (grpc-js checks it and takes it out of
    // the metadata), its messages in binary protobuf.
    received.requests.push('application/grpc');
    received.metadata.push(
      Object.fromEntries(
        Object.entries(call.metadata.getMap()).map(([key, value]) => [key, String(value)]),
      ),
    );
    try {
      const spans = decodeExport(decodeProtobufExport(call.request));
      received.spans.push(...spans);
      received.encodings.push(...spans.map(() => 'protobuf' as const));
    } catch {
      done({ code: status.INVALID_ARGUMENT, details: 'not an ExportTraceServiceRequest' });
      return;
    }
    // An empty ExportTraceServiceResponse.
    done(null, Buffer.alloc(0));
  };
  const server = new Server();
  server.addService(TRACE_SERVICE, { Export: exportSpans });
  const credentials = options.tls
    ? ServerCredentials.createSsl(
        null,
        [{ cert_chain: Buffer.from(options.tls.cert), private_key: Buffer.from(options.tls.key) }],
        false,
      )
    : ServerCredentials.createInsecure();
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', credentials, (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  const address = `127.0.0.1:${port}`;
  const url = `${options.tls ? 'https' : 'http'}://${address}`;
  return {
    ...received,
    url,
    // OTLP/gRPC's endpoint is the address itself: no path.
    endpoint: url,
    address,
    close: () => {
      server.forceShutdown();
      return Promise.resolve();
    },
  };
}
