// In-memory adapter of the record stores: a Map and a listener set.
import { supersedes, type ChangeListener, type RecordStore, type WrittenFor } from './records.ts';

export class MemoryRecordStore<T> implements RecordStore<T> {
  readonly #records = new Map<string, T>();
  readonly #listeners = new Set<ChangeListener>();

  put(key: string, value: T): Promise<void> {
    this.#records.set(key, structuredClone(value));
    this.#notify(key);
    return Promise.resolve();
  }

  delete(key: string): Promise<void> {
    if (this.#records.delete(key)) this.#notify(key);
    return Promise.resolve();
  }

  deleteIf(key: string, expected: T): Promise<boolean> {
    const current = this.#records.get(key);
    if (current === undefined || JSON.stringify(current) !== JSON.stringify(expected)) {
      return Promise.resolve(false);
    }
    this.#records.delete(key);
    this.#notify(key);
    return Promise.resolve(true);
  }

  putUnlessSuperseded(key: string, value: T & WrittenFor): Promise<boolean> {
    if (supersedes(this.#records.get(key), value)) return Promise.resolve(false);
    return this.put(key, value).then(() => true);
  }

  deleteUnlessSuperseded(key: string, writer: WrittenFor): Promise<boolean> {
    if (supersedes(this.#records.get(key), writer)) return Promise.resolve(false);
    return this.delete(key).then(() => true);
  }

  get(key: string): Promise<T | undefined> {
    const value = this.#records.get(key);
    return Promise.resolve(value === undefined ? undefined : structuredClone(value));
  }

  list(): Promise<T[]> {
    return Promise.resolve([...this.#records.values()].map((v) => structuredClone(v)));
  }

  subscribe(listener: ChangeListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #notify(key: string): void {
    for (const listener of this.#listeners) listener(key);
  }
}
