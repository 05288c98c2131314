// Request tracing across what an execution calls: http nodes and Async Callback
// deliveries carry the webhook request's correlation ID and, when the gateway accepted
// the caller's W3C Trace Context (https://www.w3.org/TR/trace-context/), that context,
// so that the services a workflow calls can be joined to the caller's trace and logs
// (docs/workflows.md, "Tracing what an execution calls"; ADR 0033). The gateway decides
// (`acceptedTraceContext`, by the deployment's TraceContextPolicy: by default only from
// callers the endpoint authenticates, the Recommendation's section 7.2) and keeps what it
// accepted in the trigger output's metadata; the engine sends what is there. No span of
// our own: the caller's `traceparent` goes on unchanged (a non-recording intermediary),
// so a downstream span is a child of the caller's. None is made up.
import type { TriggerOutput } from '../ports.ts';
import type { TraceSpan } from '../../tracing/tracing.ts';

/**
 * Whose trace context the gateway passes on (HOOKGATE_TRACE_CONTEXT): `authenticated`
 * (default) from callers of endpoints with authentication only, `all` from any caller,
 * `off` from none. The correlation ID goes on in every case.
 */
export const TRACE_CONTEXT_POLICIES = ['authenticated', 'all', 'off'] as const;
export type TraceContextPolicy = (typeof TRACE_CONTEXT_POLICIES)[number];

export const CORRELATION_HEADER = 'x-correlation-id';
export const TRACEPARENT = 'traceparent';
export const TRACESTATE = 'tracestate';

/** The combined tracestate forwarded, at most (what the Recommendation asks to keep, 512). */
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
 * does not know), with only the sampled bit of its flags (the others are that version's,
 * and reserved in 00). Upper-case hex, all-zero ids and version ff are invalid.
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
  const sent = version === '00' ? flags : (Number.parseInt(flags, 16) & 1) === 1 ? '01' : '00';
  return `00-${traceId}-${parentId}-${sent}`;
}

/**
 * The `tracestate` to forward: its list-members (empty ones dropped), undefined when
 * one is malformed (the whole header is then ignored, as the Recommendation says) or
 * none is left. Over 512 characters, members over 128 go first, one at a time from the
 * end, until it fits; then members from the end.
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
  const kept = [...members];
  let length = kept.join(',').length;
  for (let i = kept.length - 1; i >= 0 && length > MAX_TRACESTATE_LENGTH; i--) {
    const member = kept[i] as string;
    if (member.length <= LONG_MEMBER) continue;
    kept.splice(i, 1);
    length -= member.length + 1;
  }
  while (kept.length > 0 && length > MAX_TRACESTATE_LENGTH)
    length -= (kept.pop() as string).length + 1;
  return kept.length > 0 ? kept.join(',') : undefined;
}

/**
 * A caller's trace context as the gateway accepted it: `traceparent` as parseTraceparent
 * returns it (version 00, lower-case hex, valid ids), `tracestate` as parseTracestate
 * does; both absent when none was accepted.
 */
export interface AcceptedTraceContext {
  traceparent?: string;
  tracestate?: string;
}

/**
 * The trace context the gateway accepts from a request, for the trigger output's
 * metadata (and, with tracing on, the request span's parent): the caller's valid
 * `traceparent` (and `tracestate`) when the policy lets this caller's context through,
 * else nothing.
 */
export function acceptedTraceContext(
  policy: TraceContextPolicy,
  authenticated: boolean,
  headers: Record<string, string | string[] | undefined>,
): AcceptedTraceContext {
  if (policy === 'off' || (policy === 'authenticated' && !authenticated)) return {};
  const raw = headers[TRACEPARENT];
  const traceparent = parseTraceparent(typeof raw === 'string' ? raw : undefined);
  if (traceparent === undefined) return {};
  const state = headers[TRACESTATE];
  const tracestate = parseTracestate(Array.isArray(state) ? state.join(',') : state);
  return tracestate === undefined ? { traceparent } : { traceparent, tracestate };
}

/**
 * The tracing headers an execution's outbound requests carry, from its trigger output's
 * metadata: `x-correlation-id` always, `traceparent` (and `tracestate`) when the gateway
 * accepted the caller's. A header the workflow sets itself (`own`, any case) is left to it.
 */
export function tracingHeaders(
  input: Pick<TriggerOutput, 'metadata'> | undefined,
  own: Record<string, string> = {},
): Record<string, string> {
  const out: Record<string, string> = {};
  const metadata = input?.metadata;
  if (metadata === undefined) return out;
  const set = new Set(Object.keys(own).map((name) => name.toLowerCase()));
  const correlationId = metadata.correlationId;
  if (typeof correlationId === 'string' && correlationId !== '' && !set.has(CORRELATION_HEADER))
    out[CORRELATION_HEADER] = correlationId;
  const { traceparent, tracestate } = metadata;
  if (set.has(TRACEPARENT) || typeof traceparent !== 'string') return out;
  out[TRACEPARENT] = traceparent;
  if (!set.has(TRACESTATE) && typeof tracestate === 'string') out[TRACESTATE] = tracestate;
  return out;
}

/**
 * Tracing on (ADR 0040): the tracing headers with the outbound request's own CLIENT
 * span as the parent, in place of the caller's context that a non-recording hookgate
 * forwards. A `traceparent` the workflow sets itself (`own`) still wins.
 */
export function withSpan(
  headers: Record<string, string>,
  span: TraceSpan,
  own: Record<string, string> = {},
): Record<string, string> {
  const carrier = span.carrier();
  const set = new Set(Object.keys(own).map((name) => name.toLowerCase()));
  if (carrier === undefined || set.has(TRACEPARENT)) return headers;
  const out: Record<string, string> = { ...headers, [TRACEPARENT]: carrier.traceparent };
  if (set.has(TRACESTATE)) return out;
  if (carrier.tracestate !== undefined) out[TRACESTATE] = carrier.tracestate;
  else delete out[TRACESTATE];
  return out;
}
