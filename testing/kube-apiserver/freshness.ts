// Reads that name a resourceVersion the server has not reached yet wait for it, as the
// watch cache does (apiserver storage/cacher/watch_cache.go waitUntilFreshAndBlock):
// at most blockTimeout (3 s), then a 504 Timeout `Too large resource version: N,
// current: M` with a ResourceVersionTooLarge cause and retryAfterSeconds
// resourceVersionTooHighRetrySeconds (1) (storage/errors.go
// NewTooLargeResourceVersionError). Used by lists (a NotOlderThan or Exact
// resourceVersion ahead of the server) and by watch-lists (watch.ts).
import { tooLargeResourceVersion } from './status.ts';
import type { Storage } from './storage.ts';

export const BLOCK_TIMEOUT_MS = 3000;
export const TOO_HIGH_RETRY_SECONDS = 1;

/**
 * Resolves once `storage` has reached `rv`; rejects with the 504 after
 * BLOCK_TIMEOUT_MS, or with an Error when `signal` aborts (the client left).
 */
export function waitUntilFresh(storage: Storage, rv: bigint, signal?: AbortSignal): Promise<void> {
  const fresh = (): boolean => BigInt(storage.currentRv()) >= rv;
  if (fresh()) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const finish = (): void => {
      clearTimeout(timer);
      unsubscribe();
      signal?.removeEventListener('abort', onAbort);
    };
    const onAbort = (): void => {
      finish();
      reject(new Error('the client closed the request'));
    };
    const unsubscribe = storage.subscribe(() => {
      if (!fresh()) return;
      finish();
      resolve();
    });
    const timer = setTimeout(() => {
      finish();
      reject(tooLargeResourceVersion(rv, storage.currentRv(), TOO_HIGH_RETRY_SECONDS));
    }, BLOCK_TIMEOUT_MS);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
