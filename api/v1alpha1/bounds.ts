// Size bounds shared by both kinds, and the field builders that carry them.
//
// Every string of the CRDs has a maxLength, every list a maxItems and every map a
// maxProperties. A real API server estimates the worst-case cost of each CEL rule
// from these bounds and refuses a CRD whose rules could cost too much (an unbounded
// string counts as about 3 MiB, an unbounded list as about a million items): see
// docs/adr/0013-crd-size-bounds-and-cel-cost.md. The bounds are generous for real
// use; docs/resources.md lists them.
//
// Not re-exported from index.ts: the numbers are part of the schemas, not an API.
import { Type } from '@sinclair/typebox';

export const MAX_LENGTH = {
  /** A DNS subdomain (RFC 1123): object names, Secret keys. */
  subdomain: 253,
  /** A DNS label (RFC 1123): application, node ids. */
  label: 63,
  /** An HTTP header name; the token pattern allows at most 128 characters. */
  headerName: 128,
  /** An HTTP header value. */
  headerValue: 4096,
  /** A URL (issuer, JWKS, introspection, outbound request). */
  url: 2048,
  /** A duration such as `30s` or `250ms`; the patterns allow at most 8 characters. */
  duration: 16,
  /** A human-readable description. */
  description: 1024,
  /** A JSONata expression of a workflow. */
  expression: 16384,
  /** JSON text (a JSON Schema or an example document). */
  jsonText: 65536,
  /** A workflow identifier: <namespace>_<environment>_<name>, at most 329 characters. */
  workflowId: 512,
  /** A base path: /webhook/<workflowId>. */
  basePath: 1024,
  /** A generated webhook URL: base URL, base path and path segment. */
  webhookUrl: 4096,
  /** An outbound policy entry: a host name (253) with `*.` before or `:65535` after it. */
  outboundEntry: 261,
} as const;

export const MAX_ITEMS = {
  /** Status conditions: each kind writes four types at most. */
  conditions: 16,
  /** Literal request or response headers of a workflow node. */
  headers: 64,
  /** Allow or deny entries of a workflow's outbound policy. */
  outboundEntries: 64,
} as const;

/** An HTTP token (RFC 9110 §5.6.2), at most 128 characters. */
export const HEADER_NAME_PATTERN = "^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$";

/** An HTTP header name: the token pattern and its length bound. */
export const HeaderName = (options: { description: string; default?: string }) =>
  Type.String({ pattern: HEADER_NAME_PATTERN, maxLength: MAX_LENGTH.headerName, ...options });

/** An http(s) URL without whitespace. */
export const HttpsUrl = (description: string) =>
  Type.String({ pattern: '^https?://[^\\s]+$', maxLength: MAX_LENGTH.url, description });
