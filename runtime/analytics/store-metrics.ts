// What the bounded stores of a process hold and drop (runtime/bounded.ts), read at
// every scrape: hookgate_store_bytes, hookgate_store_entries and
// hookgate_store_evictions_total, each with a `store` label.
import { Counter, Gauge, type Registry } from 'prom-client';
import type { BoundedStore, BoundedStoreStats, EvictionReason } from '../bounded.ts';

export const STORE_METRIC = {
  bytes: 'hookgate_store_bytes',
  entries: 'hookgate_store_entries',
  evictions: 'hookgate_store_evictions_total',
} as const;

export function storeMetrics(registry: Registry, stores: BoundedStore[]): void {
  const registers = [registry];
  /** The stats of one scrape: read once for the three metrics. */
  let reading: Promise<(BoundedStoreStats | undefined)[]> | undefined;
  const read = () =>
    (reading ??= Promise.all(
      stores.map(async (s) => {
        try {
          return await s.stats();
        } catch {
          return undefined; // a store that cannot answer (Redis down) is left out
        }
      }),
    ).finally(() => queueMicrotask(() => (reading = undefined))));
  /** One gauge per size a store reports, each set from the same scrape's stats. */
  const gauge = (name: string, help: string, size: (stats: BoundedStoreStats) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ['store'],
      registers,
      async collect(this: Gauge<'store'>) {
        const stats = await read();
        stores.forEach((s, i) => {
          const st = stats[i];
          if (st) this.set({ store: s.storeName }, size(st));
        });
      },
    });
  gauge(
    STORE_METRIC.bytes,
    'Bytes a store holds (about the size of its data as JSON), by store.',
    (st) => st.bytes,
  );
  gauge(STORE_METRIC.entries, 'Entries a store holds, by store.', (st) => st.entries);
  const seen = new Map<string, number>();
  new Counter({
    name: STORE_METRIC.evictions,
    help: 'Entries a store dropped, by store and reason (bytes: its byte budget; count: its entry cap; expired: its lifetime).',
    labelNames: ['store', 'reason'],
    registers,
    async collect(this: Counter<'store' | 'reason'>) {
      const stats = await read();
      stores.forEach((s, i) => {
        const st = stats[i];
        if (!st) return;
        for (const reason of Object.keys(st.evictions) as EvictionReason[]) {
          const key = `${s.storeName}\u0000${reason}`;
          const delta = st.evictions[reason] - (seen.get(key) ?? 0);
          if (delta > 0) this.inc({ store: s.storeName, reason }, delta);
          else if (!seen.has(key)) this.inc({ store: s.storeName, reason }, 0);
          seen.set(key, st.evictions[reason]);
        }
      });
    },
  });
}
