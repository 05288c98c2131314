// How soon a trigger whose route the gateways do not serve everywhere yet is looked at
// again: an exponential backoff per trigger, as client-go's
// ItemExponentialFailureRateLimiter (controller/rate-limiter.ts) but started over
// whenever what the trigger waits for changes. A fixed delay made every trigger that a
// gateway never serves (version skew, a stuck table) cost a reconcile, and its reads
// from the stores, every 5 s forever: 10,000 of them, 2,000 reconciles a second. The
// controller's `requeueAfterMs` resets the work queue's own backoff, so the growth has
// to live here.
//
// Started over (the next delay is the first one again) when:
// - the trigger's generation, or the condition it waits in, changes (reason or message:
//   "served by 1 of 2" after "0 of 2" is progress), or
// - the gateways' change feed names the trigger's route, or every route (`reset`,
//   `resetAll`: Reconciler.servedChanged), or
// - it stops waiting (served everywhere, not deployable, deleted: `reset`).

/** How soon a route that is not served everywhere is looked at again. */
export interface RecheckOptions {
  /** First delay while some gateway does not serve the current generation. Default 5 s. */
  pendingMs?: number;
  /** First delay while no gateway is running. Default 30 s (a gateway that starts is announced anyway). */
  noGatewayMs?: number;
  /** Each further recheck of an unchanged wait doubles the delay, up to this. Default 5 min. */
  maxMs?: number;
}

export const DEFAULT_PENDING_MS = 5_000;
export const DEFAULT_NO_GATEWAY_MS = 30_000;
export const DEFAULT_RECHECK_MAX_MS = 5 * 60_000;

interface Waiting {
  /** What the trigger waits in: a change starts the backoff over. */
  state: string;
  /** Rechecks asked for in this state so far. */
  attempts: number;
}

export class RecheckBackoff {
  readonly #maxMs: number;
  readonly #waiting = new Map<string, Waiting>();

  constructor(maxMs = DEFAULT_RECHECK_MAX_MS) {
    this.#maxMs = maxMs;
  }

  /**
   * The delay before trigger `key`, waiting in `state`, is looked at again:
   * `firstMs·2^n` for its n-th recheck in an unchanged state, capped at `maxMs`.
   */
  next(key: string, state: string, firstMs: number): number {
    const waiting = this.#waiting.get(key);
    const attempts = waiting?.state === state ? waiting.attempts : 0;
    this.#waiting.set(key, { state, attempts: attempts + 1 });
    // 2^n overflows to Infinity past n≈1023; min() then yields the cap, like client-go.
    return Math.min(firstMs * 2 ** attempts, Math.max(this.#maxMs, firstMs));
  }

  /** Start `key` over: its next recheck, if any, waits the first delay again. */
  reset(key: string): void {
    this.#waiting.delete(key);
  }

  /** Start every trigger over (the set of gateways changed, the feed reconnected). */
  resetAll(): void {
    this.#waiting.clear();
  }
}
