// The gateway's own outbound requests for authentication (JWKS fetches, RFC 7662 token
// introspection) go through the outbound guard (runtime/engine/outbound/, rule G1), like
// http nodes and callbacks: a WebhookTrigger's author must not be able to make the
// gateway reach cloud metadata, the API server or in-cluster services the operator did
// not open.
//
// - The policy is the cluster's, narrowed by the trigger's namespace (not by any
//   workflow's spec.outbound: that is the workflow author's rule for its own requests).
// - https only, unless the cluster policy names the destination itself (a host, wildcard
//   or host:port entry, or a literal IP inside an allow entry): the callbacks' rule.
// - Host names are decided at connect time on every resolved address (no rebinding);
//   redirects are never followed (a 3xx is an unusable answer: 503).
// - A refusal reaches the caller as the same 503 auth-unavailable an unreachable
//   provider gives (no policy detail); the operator hears of it through
//   `onOutboundRefused` (the serving roles log it), once per route version and reason.
import type { RouteRecord } from '../../../../api/records/records.ts';
import {
  OutboundGuard,
  findRefusal,
  type OutboundRefusedError,
  type OutboundTarget,
} from '../../../engine/outbound/guard.ts';
import { sendOutbound } from '../../../engine/outbound/request.ts';

/** What an authentication provider request is for. */
export type AuthFetchPurpose = 'jwks' | 'introspection';

/** A provider request the outbound policy refused (for the log; never for the caller). */
export interface AuthOutboundRefusal {
  /** `<namespace>/<name>` of the WebhookTrigger. */
  route: string;
  purpose: AuthFetchPurpose;
  /** The guard's reason, e.g. `address 169.254.169.254 is a cloud metadata endpoint …`. */
  reason: string;
}

/** The guard settings the token verifiers share. */
export interface AuthOutboundOptions {
  /**
   * The outbound guard (the process's: the cluster policy and the namespace narrowings).
   * Default: a guard of its own with no allow entries (public https destinations only).
   */
  outbound?: OutboundGuard;
  /** Told about each refused provider request (once per route version and reason). */
  onOutboundRefused?: (refusal: AuthOutboundRefusal) => void;
}

/** Answers larger than this are unusable (a JWKS or an introspection answer is small). */
export const MAX_AUTH_RESPONSE_BYTES = 1024 * 1024;

/** Schemes of provider requests: https, unless the cluster policy names the destination. */
export const AUTH_PROTOCOLS = ['https:'];

/** Statuses whose Response may not have a body. */
const NULL_BODY = new Set([204, 205, 304]);

/** The scope a trigger's provider requests go out in: cluster policy + its namespace's. */
export function scopeFor(guard: OutboundGuard, namespace: string): OutboundTarget {
  return guard.forWorkflow({ namespace, spec: {} });
}

export interface AuthFetchInit {
  method: 'GET' | 'POST';
  headers?: Headers | Record<string, string>;
  body?: string;
  signal?: AbortSignal;
}

/**
 * A fetch-shaped function over the guard: the URL is checked first, the request is sent
 * with the scope's undici Agent (connect-time address checks), the answer is read whole
 * (at most MAX_AUTH_RESPONSE_BYTES) within `timeoutMs`. Throws OutboundRefusedError for
 * a refused destination. The scope is looked up at every call (a cached scope may have
 * been closed since).
 */
export function guardedFetch(
  scope: () => OutboundTarget,
  timeoutMs: number,
): (url: string, init: AuthFetchInit) => Promise<Response> {
  return async (url, init) => {
    const headers =
      init.headers instanceof Headers
        ? Object.fromEntries(init.headers.entries())
        : (init.headers ?? {});
    const answer = await sendOutbound(scope(), {
      method: init.method,
      url,
      headers,
      ...(init.body !== undefined ? { body: init.body } : {}),
      timeoutMs,
      protocols: AUTH_PROTOCOLS,
      ...(init.signal ? { signal: init.signal } : {}),
      maxResponseBytes: MAX_AUTH_RESPONSE_BYTES,
    });
    if (answer.status < 200 || answer.status > 599) {
      throw new Error(`unexpected status ${answer.status}`);
    }
    return new Response(NULL_BODY.has(answer.status) ? null : new Uint8Array(answer.body), {
      status: answer.status,
      headers: answer.headers,
    });
  };
}

/**
 * Reports refusals once per route record (route version) and purpose + reason: a
 * refused JWKS is tried again on every request, and every request is not a log line.
 */
export class RefusalReporter {
  readonly #report: ((refusal: AuthOutboundRefusal) => void) | undefined;
  readonly #seen = new WeakMap<RouteRecord, Set<string>>();

  constructor(report: ((refusal: AuthOutboundRefusal) => void) | undefined) {
    this.#report = report;
  }

  /** The refusal in `error`'s cause chain, reported; undefined when there is none. */
  check(
    route: RouteRecord,
    purpose: AuthFetchPurpose,
    error: unknown,
  ): OutboundRefusedError | undefined {
    const refusal = findRefusal(error);
    if (!refusal) return undefined;
    let seen = this.#seen.get(route);
    if (!seen) {
      seen = new Set();
      this.#seen.set(route, seen);
    }
    const key = `${purpose} ${refusal.message}`;
    // Bounded: a name whose answers keep changing cannot grow it without end.
    if (!seen.has(key) && seen.size < 16) {
      seen.add(key);
      try {
        this.#report?.({ route: route.key, purpose, reason: refusal.message });
      } catch {
        // A failing report must not change the answer.
      }
    }
    return refusal;
  }
}

/** The guard given, or one of its own with no allow entries, made on first use. */
export function lazyGuard(given: OutboundGuard | undefined): () => OutboundGuard {
  let own: OutboundGuard | undefined = given;
  return () => (own ??= new OutboundGuard());
}
