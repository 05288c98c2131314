// The sample store of schema learning: per trigger, the newest request bodies and
// workflow responses as JSON text, bounded in count and bytes per side. Only bodies:
// never headers, query strings or credentials (recorder.ts decides what is recorded).
// Adapters: memory (one process, embedded) here, Redis (shared by gateways and workers)
// in samples-redis.ts. The memory one reports what it holds (store "schema-samples"): up
// to MAX_MEMORY_TRIGGERS x 2 sides x the recorder's bytes per side (128 MiB by default).
import { noEvictions, type BoundedStore, type BoundedStoreStats } from '../bounded.ts';

export type SampleSide = 'requests' | 'responses';
export const SAMPLE_SIDES: readonly SampleSide[] = ['requests', 'responses'];

export interface SampleBounds {
  /** Samples kept per side (the newest). */
  maxSamples: number;
  /** Bytes of JSON text kept per side; the oldest go first when over. */
  maxBytes: number;
}

export interface StoredSamples {
  /** JSON texts, newest first. */
  requests: string[];
  responses: string[];
}

export interface SampleStore {
  /** Keeps `json` as the newest sample of the side; the oldest go beyond the bounds. */
  add(triggerKey: string, side: SampleSide, json: string, bounds: SampleBounds): Promise<void>;
  read(triggerKey: string): Promise<StoredSamples>;
  /** Forgets every sample of the trigger. */
  clear(triggerKey: string): Promise<void>;
}

interface Kept {
  texts: string[];
  bytes: number;
}

/** Triggers whose samples the memory store keeps (the least recently written go first). */
export const MAX_MEMORY_TRIGGERS = 256;

export class MemorySampleStore implements SampleStore, BoundedStore {
  readonly storeName = 'schema-samples';
  readonly #triggers = new Map<string, Record<SampleSide, Kept>>();
  readonly #maxTriggers: number;
  /** Bytes and samples of every trigger, both sides. */
  #bytes = 0;
  #entries = 0;
  /**
   * Samples dropped with their trigger for the trigger cap (`count`). The newest-first
   * rotation within a side's bounds is what the bounds are for: not counted.
   */
  readonly #evictions = noEvictions();

  constructor(options: { maxTriggers?: number } = {}) {
    this.#maxTriggers = options.maxTriggers ?? MAX_MEMORY_TRIGGERS;
  }

  add(triggerKey: string, side: SampleSide, json: string, bounds: SampleBounds): Promise<void> {
    const bytes = Buffer.byteLength(json);
    if (bytes > bounds.maxBytes || bounds.maxSamples < 1) return Promise.resolve();
    let trigger = this.#triggers.get(triggerKey);
    // Re-inserted: the Map's order is the order of the last writes.
    this.#triggers.delete(triggerKey);
    trigger ??= { requests: { texts: [], bytes: 0 }, responses: { texts: [], bytes: 0 } };
    this.#triggers.set(triggerKey, trigger);
    const kept = trigger[side];
    kept.texts.unshift(json);
    kept.bytes += bytes;
    this.#bytes += bytes;
    this.#entries++;
    while (kept.texts.length > bounds.maxSamples || kept.bytes > bounds.maxBytes) {
      const dropped = Buffer.byteLength(kept.texts.pop() as string);
      kept.bytes -= dropped;
      this.#bytes -= dropped;
      this.#entries--;
    }
    while (this.#triggers.size > this.#maxTriggers) {
      const oldest = this.#triggers.keys().next();
      if (oldest.done) break;
      this.#evictions.count += this.#forget(oldest.value);
    }
    return Promise.resolve();
  }

  /** Drops a trigger's samples; how many there were. */
  #forget(triggerKey: string): number {
    const trigger = this.#triggers.get(triggerKey);
    if (!trigger) return 0;
    this.#triggers.delete(triggerKey);
    let samples = 0;
    for (const side of SAMPLE_SIDES) {
      this.#bytes -= trigger[side].bytes;
      samples += trigger[side].texts.length;
    }
    this.#entries -= samples;
    return samples;
  }

  stats(): BoundedStoreStats {
    return { bytes: this.#bytes, entries: this.#entries, evictions: { ...this.#evictions } };
  }

  read(triggerKey: string): Promise<StoredSamples> {
    const trigger = this.#triggers.get(triggerKey);
    return Promise.resolve({
      requests: [...(trigger?.requests.texts ?? [])],
      responses: [...(trigger?.responses.texts ?? [])],
    });
  }

  clear(triggerKey: string): Promise<void> {
    this.#forget(triggerKey);
    return Promise.resolve();
  }
}
