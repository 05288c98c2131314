// The sample store of schema learning: per trigger, the newest request bodies and
// workflow responses as JSON text, bounded in count and bytes per side. Only bodies:
// never headers, query strings or credentials (recorder.ts decides what is recorded).
// Adapters: memory (one process, embedded) here, Redis (shared by gateways and workers)
// in samples-redis.ts.

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

export class MemorySampleStore implements SampleStore {
  readonly #triggers = new Map<string, Record<SampleSide, Kept>>();
  readonly #maxTriggers: number;

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
    while (kept.texts.length > bounds.maxSamples || kept.bytes > bounds.maxBytes) {
      kept.bytes -= Buffer.byteLength(kept.texts.pop() as string);
    }
    while (this.#triggers.size > this.#maxTriggers) {
      const oldest = this.#triggers.keys().next();
      if (oldest.done) break;
      this.#triggers.delete(oldest.value);
    }
    return Promise.resolve();
  }

  read(triggerKey: string): Promise<StoredSamples> {
    const trigger = this.#triggers.get(triggerKey);
    return Promise.resolve({
      requests: [...(trigger?.requests.texts ?? [])],
      responses: [...(trigger?.responses.texts ?? [])],
    });
  }

  clear(triggerKey: string): Promise<void> {
    this.#triggers.delete(triggerKey);
    return Promise.resolve();
  }
}
