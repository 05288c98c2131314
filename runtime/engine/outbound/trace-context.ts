// Request tracing across what an execution calls: http nodes and Async Callback
// deliveries carry the webhook request's correlation ID and, when the caller sent one,
// its W3C Trace Context (https://www.w3.org/TR/trace-context/), so that the services a
// workflow calls can be joined to the caller's trace and logs (docs/workflows.md,
// "Tracing"). The engine records no spans of its own: it forwards the caller's
// `traceparent` unchanged (a non-recording intermediary, as the Recommendation allows),
// so a downstream span is a child of the caller's. No header is made up: without a valid
// `traceparent` from the caller, none is sent.
import type { TriggerOutput } from '../ports.ts';

export const CORRELATION_HEADER = 'x-correlation-id';
export const TRACEPARENT = 'traceparent';
export const TRACESTATE = 'tracestate';

/** The combined tracestate forwarded, at most (the Recommendation's floor: 512). */
export const MAX_TRACESTATE_LENGTH = 512;
/** Longer list-members go first when the list must be cut (the Recommendation's rule). */
const LONG_MEMBER = 128;
/** At most 32 list-members. */
const MAX_MEMBERS = 32;

const HEX = /^[0-9a-f]+$/;
const ZEROS = /^0+$/;
/** A tracestate list-member: key=value, printable ASCII without ',' and '=' in the value. */
const MEMBER =
  /^(?:[a-z][_0-9a-z\-*/]{0,255}|[a-z0-9][_0-9a-z\-*/]{0,240}@[a-z][_0-9a-z\-*/]{0,13})=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/;

/**
 * The `traceparent` to forward for a received one, or undefined when it is not valid.
 * Version 00 exactly as the Recommendation writes it; a later version is read for its
 * first four fields and forwarded as version 00 (a sender must not send a version it
 * does not know). Upper-case hex, all-zero ids and version ff are invalid.
 */
export function parseTraceparent(value: string | undefined): string | undefined {
  if (value === undefined || value.length < 55) return undefined;
  const version = value.slice(0, 2);
  if (!HEX.test(version) || version === 'ff') return undefined;
  if (version === '00' ? value.length !== 55 : value.length > 55 && value[55] !== '-')
    return undefined;
  if (value[2] !== '-' || value[35] !== '-' || value[52] !== '-') return undefined;
  const traceId = value.slice(3, 35);
  const parentId = value.slice(36, 52);
  const flags = value.slice(53, 55);
  if (!HEX.test(traceId) || ZEROS.test(traceId)) return undefined;
  if (!HEX.test(parentId) || ZEROS.test(parentId)) return undefined;
  if (!HEX.test(flags)) return undefined;
  return `00-${traceId}-${parentId}-${flags}`;
}

/**
 * The `tracestate` to forward: its list-members (empty ones dropped), undefined when
 * one is malformed (the whole header is then ignored, as the Recommendation says) or
 * none is left. Over 512 characters, members over 128 go first, then from the end.
 */
export function parseTracestate(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const members = value
    .split(',')
    .map((m) => m.trim())
    .filter((m) => m !== '');
  if (members.length === 0 || members.length > MAX_MEMBERS) return undefined;
  if (!members.every((m) => MEMBER.test(m))) return undefined;
  const keys = new Set(members.map((m) => m.slice(0, m.indexOf('='))));
  if (keys.size !== members.length) return undefined;
  let kept = members;
  const length = (list: string[]) => list.join(',').length;
  if (length(kept) > MAX_TRACESTATE_LENGTH) kept = kept.filter((m) => m.length <= LONG_MEMBER);
  while (kept.length > 0 && length(kept) > MAX_TRACESTATE_LENGTH) kept = kept.slice(0, -1);
  return kept.length > 0 ? kept.join(',') : undefined;
}

/**
 * The tracing headers an execution's outbound requests carry, from its trigger output:
 * `x-correlation-id` always, `traceparent` (and `tracestate`) when the caller sent a
 * valid one. A header the workflow sets itself (`own`, any case) is left to it.
 */
export function tracingHeaders(
  input: Pick<TriggerOutput, 'headers' | 'metadata'> | undefined,
  own: Record<string, string> = {},
): Record<string, string> {
  const out: Record<string, string> = {};
  if (input === undefined) return out;
  const set = new Set(Object.keys(own).map((name) => name.toLowerCase()));
  const correlationId = input.metadata?.correlationId;
  if (typeof correlationId === 'string' && correlationId !== '' && !set.has(CORRELATION_HEADER))
    out[CORRELATION_HEADER] = correlationId;
  if (set.has(TRACEPARENT)) return out;
  const headers = input.headers ?? {};
  const traceparent = parseTraceparent(headers[TRACEPARENT]);
  if (traceparent === undefined) return out;
  out[TRACEPARENT] = traceparent;
  const tracestate = set.has(TRACESTATE) ? undefined : parseTracestate(headers[TRACESTATE]);
  if (tracestate !== undefined) out[TRACESTATE] = tracestate;
  return out;
}
