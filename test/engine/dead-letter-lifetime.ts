// One rule both dead-letter stores keep (ADR 0039): an entry lives a lifetime (the
// store's ttlMs, 1000 ms here) from its execution's dead-lettering, however often it
// is added, and a dead-letter time ahead of the store's clock counts from the clock.
import { expect } from 'vitest';
import type { DeadLetter, DeadLetterStore } from '../../runtime/engine/dead-letters.ts';

/** `store` made with ttlMs 1000 and `now: () => clock.now`; `at` builds an entry. */
export async function expectLifetimeFromDeadLettering(
  store: DeadLetterStore,
  clock: { now: number },
  at: (id: string, deadLetteredMs: number) => DeadLetter,
): Promise<void> {
  await store.add(at('a', clock.now));
  clock.now += 100;
  await store.add(at('b', clock.now));
  clock.now += 800;
  // A retry that could not start puts its entry back (recovery-routes.ts); a worker
  // taking over a dead worker's job adds it again (worker.ts): neither extends it.
  const taken = await store.take('a');
  expect(taken?.entry.executionId).toBe('a');
  await store.add(taken?.entry ?? at('a', 0));
  expect((await store.list({})).map((e) => e.executionId)).toEqual(['b', 'a']);
  clock.now += 101;
  expect(await store.get('a')).toBeUndefined();
  expect((await store.list({})).map((e) => e.executionId)).toEqual(['b']);
  expect(await store.count()).toBe(1);
  await store.add(at('c', clock.now + 3_600_000));
  clock.now += 1001;
  expect(await store.count()).toBe(0);
}
