// Entries that each live until a time, kept in the order they were set (oldest first),
// with their bytes summed: what the memory executions store keeps beside its records
// (a discarded execution's events for the handover time, a tombstone for its key's
// window: execution-store.ts).

/** What an entry must say: until when it lives (ms) and its bytes. */
export interface Expiring {
  until: number;
  bytes: number;
}

export class ExpiringEntries<V extends Expiring> {
  readonly #entries = new Map<string, V>();
  #bytes = 0;

  get size(): number {
    return this.#entries.size;
  }

  /** The entries' bytes, summed. */
  get bytes(): number {
    return this.#bytes;
  }

  get(id: string): V | undefined {
    return this.#entries.get(id);
  }

  /** Sets `id` after the others, whatever its place before. */
  set(id: string, value: V): void {
    this.delete(id);
    this.#entries.set(id, value);
    this.#bytes += value.bytes;
  }

  /** Takes `id` out; its entry, if it had one. */
  delete(id: string): V | undefined {
    const value = this.#entries.get(id);
    if (!value) return undefined;
    this.#entries.delete(id);
    this.#bytes -= value.bytes;
    return value;
  }

  /** `value` (an entry held) now takes `bytes`. */
  resize(value: V, bytes: number): void {
    this.#bytes += bytes - value.bytes;
    value.bytes = bytes;
  }

  /** Oldest first. */
  entries(): MapIterator<[string, V]> {
    return this.#entries.entries();
  }

  /**
   * Takes out the entries whose time `isOver`, oldest first, up to the first that is not
   * (one set for longer holds the later ones): the ones taken out.
   */
  expire(isOver: (until: number) => boolean): V[] {
    const gone: V[] = [];
    for (const [id, value] of this.#entries) {
      if (!isOver(value.until)) break;
      this.delete(id);
      gone.push(value);
    }
    return gone;
  }
}
