// The last good JWKS of one key set, kept for a bounded time while refreshes fail.
//
// jose's createRemoteJWKSet uses a set for its cache age (10 min) and then fetches it
// again before verifying anything: when that refresh fails, every token got 503, even
// those whose key the set held. Wrapped around the set's fetch (jose's customFetch),
// this answers a failed refresh with the last set that was fetched, for up to
// `maxStaleMs` (24 h) after that fetch, and reports each such answer (a count of the
// refreshes failed in a row, the set's age). After that the failure reaches jose as
// before: 503, fail closed. A refresh the outbound policy refuses is not answered from
// the old set: the operator withdrew that destination, and with it its keys.
//
// jose believes a set it was handed is fresh for another cache age; `expired()` tells
// the verifier that the set jose holds came from here and is now too old, so that it
// makes jose fetch again (and fail) before using it: no stale key is used past the bound.
import { findRefusal } from '../../../engine/outbound/guard.ts';
import type { AuthFetchInit } from './outbound-fetch.ts';

type JwksFetch = (url: string, init: AuthFetchInit) => Promise<Response>;

/** How long past its fetch a key set is used while its refreshes fail (ms). */
export const JWKS_MAX_STALE_MS = 24 * 3_600_000;

/** A failed refresh answered with the last good set. */
export interface StaleJwksUse {
  /** Refreshes failed since the set was fetched (this one included). */
  failedRefreshes: number;
  /** How old the set is (ms since its fetch, by the verifier's clock). */
  ageMs: number;
  /** Why the refresh failed: the error's message, or the status jose would have seen. */
  reason: string;
}

export class LastGoodJwks {
  readonly #maxStaleMs: number;
  readonly #nowMs: () => number;
  readonly #onStale: ((use: StaleJwksUse) => void) | undefined;
  #body: string | undefined;
  #fetchedAt = 0;
  #failedRefreshes = 0;
  /** Whether the set jose holds now is the one handed over for a failed refresh. */
  #servedStale = false;

  constructor(
    maxStaleMs: number,
    nowMs: () => number,
    onStale: ((use: StaleJwksUse) => void) | undefined,
  ) {
    this.#maxStaleMs = maxStaleMs;
    this.#nowMs = nowMs;
    this.#onStale = onStale;
  }

  /** Refreshes failed in a row (0 after a good fetch). */
  get failedRefreshes(): number {
    return this.#failedRefreshes;
  }

  /**
   * Whether the set jose holds came from a failed refresh: a token whose key it lacks
   * may be signed with a newer key the provider could not give, so it gets the
   * refresh's 503, not a 401.
   */
  get servingStale(): boolean {
    return this.#servedStale;
  }

  /** The set jose holds came from a failed refresh and is past its bound: fetch first. */
  expired(): boolean {
    return this.#servedStale && !this.#usable();
  }

  #usable(): boolean {
    if (this.#body === undefined) return false;
    const age = this.#nowMs() - this.#fetchedAt;
    // A clock stepped back before the fetch time: the age is unknown, so not usable.
    return age >= 0 && age < this.#maxStaleMs;
  }

  /** `send` (a fetch answering 200 with a key set, or failing) with the fallback. */
  wrap(send: JwksFetch): JwksFetch {
    return async (url, init) => {
      let response: Response | undefined;
      let error: unknown;
      try {
        response = await send(url, init);
      } catch (thrown) {
        error = thrown;
      }
      if (response?.status === 200) {
        const body = await response.text();
        this.#body = body;
        this.#fetchedAt = this.#nowMs();
        this.#failedRefreshes = 0;
        this.#servedStale = false;
        return new Response(body, { status: 200, headers: response.headers });
      }
      if (this.#body !== undefined) this.#failedRefreshes++;
      if (this.#usable() && findRefusal(error) === undefined) {
        this.#servedStale = true;
        this.#onStale?.({
          failedRefreshes: this.#failedRefreshes,
          ageMs: this.#nowMs() - this.#fetchedAt,
          reason: error instanceof Error ? error.message : `HTTP ${response?.status ?? '?'}`,
        });
        return new Response(this.#body, { status: 200 });
      }
      if (response === undefined) throw error;
      return response;
    };
  }
}
