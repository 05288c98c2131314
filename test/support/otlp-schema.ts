// The part of the OTLP trace export request (opentelemetry-proto: collector/trace/v1,
// trace/v1, resource/v1, common/v1) that the tests read, as a protobufjs descriptor:
// field names in the JSON encoding's camelCase, numbers as the specification's .proto
// files give them. protobufjs decodes with it and skips what it leaves out (span events
// and links, dropped counts, schema URLs); the enums (span kind, status code) are read
// as the varints they are.
import protobuf from 'protobufjs';

const keyValues = (id: number) => ({ rule: 'repeated', type: 'KeyValue', id });

const SCHEMA = {
  nested: {
    AnyValue: {
      oneofs: {
        value: {
          oneof: [
            'stringValue',
            'boolValue',
            'intValue',
            'doubleValue',
            'arrayValue',
            'kvlistValue',
            'bytesValue',
          ],
        },
      },
      fields: {
        stringValue: { type: 'string', id: 1 },
        boolValue: { type: 'bool', id: 2 },
        intValue: { type: 'int64', id: 3 },
        doubleValue: { type: 'double', id: 4 },
        arrayValue: { type: 'ArrayValue', id: 5 },
        kvlistValue: { type: 'KeyValueList', id: 6 },
        bytesValue: { type: 'bytes', id: 7 },
      },
    },
    ArrayValue: { fields: { values: { rule: 'repeated', type: 'AnyValue', id: 1 } } },
    KeyValueList: { fields: { values: keyValues(1) } },
    KeyValue: { fields: { key: { type: 'string', id: 1 }, value: { type: 'AnyValue', id: 2 } } },
    InstrumentationScope: {
      fields: {
        name: { type: 'string', id: 1 },
        version: { type: 'string', id: 2 },
        attributes: keyValues(3),
      },
    },
    Resource: { fields: { attributes: keyValues(1) } },
    Status: { fields: { message: { type: 'string', id: 2 }, code: { type: 'int32', id: 3 } } },
    Span: {
      fields: {
        traceId: { type: 'bytes', id: 1 },
        spanId: { type: 'bytes', id: 2 },
        traceState: { type: 'string', id: 3 },
        parentSpanId: { type: 'bytes', id: 4 },
        name: { type: 'string', id: 5 },
        kind: { type: 'int32', id: 6 },
        startTimeUnixNano: { type: 'fixed64', id: 7 },
        endTimeUnixNano: { type: 'fixed64', id: 8 },
        attributes: keyValues(9),
        status: { type: 'Status', id: 15 },
        flags: { type: 'fixed32', id: 16 },
      },
    },
    ScopeSpans: {
      fields: {
        scope: { type: 'InstrumentationScope', id: 1 },
        spans: { rule: 'repeated', type: 'Span', id: 2 },
      },
    },
    ResourceSpans: {
      fields: {
        resource: { type: 'Resource', id: 1 },
        scopeSpans: { rule: 'repeated', type: 'ScopeSpans', id: 2 },
      },
    },
    ExportTraceServiceRequest: {
      fields: { resourceSpans: { rule: 'repeated', type: 'ResourceSpans', id: 1 } },
    },
  },
};

/** ExportTraceServiceRequest, as far as the tests read it. */
export const exportTraceServiceRequest = protobuf.Root.fromJSON(SCHEMA).lookupType(
  'ExportTraceServiceRequest',
);
