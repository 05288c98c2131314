// In-memory object storage: one global resourceVersion counter (K1), the objects of
// every resource, and a bounded history of change events that watches replay (K12,
// K14). Everything is synchronous, so a watch that subscribes in the same tick as it
// reads the history misses nothing.
import type { KubeObject } from './resources.ts';

export type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface StoredEvent {
  rv: number;
  type: EventType;
  /** storageKey of the resource (`group/plural`). */
  resource: string;
  /** The object after the change (for DELETED: the last state, with the deletion's RV). */
  object: KubeObject;
  /** The object before the change (undefined for ADDED). */
  previous?: KubeObject;
}

type Listener = (event: StoredEvent) => void;

function objectKey(namespace: string | undefined, name: string): string {
  return `${namespace ?? ''}/${name}`;
}

export class Storage {
  private counter: number;
  private readonly objects = new Map<string, Map<string, KubeObject>>();
  private readonly history: StoredEvent[] = [];
  /** RV of the newest event evicted from the history (0: nothing evicted yet). */
  private compacted = 0;
  /**
   * Per resource: the RV its watch cache was last restarted at (a CRD change recreates
   * the custom resources' storage); watches from an older RV get 410 Expired.
   */
  private readonly cacheStart = new Map<string, number>();
  private readonly listeners = new Set<Listener>();
  historyWindow: number;

  constructor(historyWindow: number, firstRv = 1000) {
    this.historyWindow = historyWindow;
    this.counter = firstRv;
  }

  currentRv(): number {
    return this.counter;
  }

  /**
   * The oldest RV a watch may start from; older ones get 410 Expired. With `resource`,
   * also no older than the RV its watch cache restarted at.
   */
  oldestWatchableRv(resource?: string): number {
    const start = resource === undefined ? 0 : (this.cacheStart.get(resource) ?? 0);
    return Math.max(this.compacted, start);
  }

  /**
   * The watch cache of `resource` starts again at `rv` (customresource_handler.go
   * removeStorage_locked: a new cacher lists at the current RV; its history begins
   * there, watch_cache_history.go GetIntervalLocked).
   */
  restartWatchCache(resource: string, rv: number): void {
    this.cacheStart.set(resource, rv);
  }

  get(resource: string, namespace: string | undefined, name: string): KubeObject | undefined {
    const obj = this.objects.get(resource)?.get(objectKey(namespace, name));
    return obj ? structuredClone(obj) : undefined;
  }

  /** Objects of one resource (optionally one namespace), sorted by namespace/name. */
  list(resource: string, namespace?: string): KubeObject[] {
    const all = [...(this.objects.get(resource)?.entries() ?? [])]
      .filter(([, o]) => namespace === undefined || o.metadata.namespace === namespace)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return all.map(([, o]) => structuredClone(o));
  }

  /** Store a new or changed object under the next RV and emit the event. */
  write(resource: string, obj: KubeObject, type: 'ADDED' | 'MODIFIED'): KubeObject {
    const name = obj.metadata.name ?? '';
    const table = this.objects.get(resource) ?? new Map<string, KubeObject>();
    this.objects.set(resource, table);
    const previous = table.get(objectKey(obj.metadata.namespace, name));
    const stored = structuredClone(obj);
    stored.metadata.resourceVersion = String(++this.counter);
    table.set(objectKey(obj.metadata.namespace, name), stored);
    this.emit({
      rv: this.counter,
      type,
      resource,
      object: stored,
      ...(previous ? { previous } : {}),
    });
    return structuredClone(stored);
  }

  /** Remove an object under the next RV; DELETED carries the last state at that RV. */
  remove(resource: string, obj: KubeObject): KubeObject {
    const table = this.objects.get(resource);
    const key = objectKey(obj.metadata.namespace, obj.metadata.name ?? '');
    const previous = table?.get(key);
    table?.delete(key);
    const last = structuredClone(previous ?? obj);
    last.metadata.resourceVersion = String(++this.counter);
    this.emit({
      rv: this.counter,
      type: 'DELETED',
      resource,
      object: last,
      ...(previous ? { previous } : {}),
    });
    return structuredClone(last);
  }

  /**
   * The objects of one resource as they were at `rv`, rebuilt by undoing the newer
   * history events; 'expired' when the window no longer reaches back that far.
   */
  listAt(resource: string, rv: number, namespace?: string): KubeObject[] | 'expired' {
    const newer = this.eventsSince(rv);
    if (newer === 'expired') return 'expired';
    const state = new Map(
      this.list(resource).map((o) => [objectKey(o.metadata.namespace, o.metadata.name ?? ''), o]),
    );
    for (const e of newer.filter((x) => x.resource === resource).reverse()) {
      const key = objectKey(e.object.metadata.namespace, e.object.metadata.name ?? '');
      if (e.previous) state.set(key, structuredClone(e.previous));
      else state.delete(key);
    }
    return [...state.entries()]
      .filter(([, o]) => namespace === undefined || o.metadata.namespace === namespace)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, o]) => o);
  }

  /**
   * Events after `rv` (exclusive), or 'expired' when some of them left the window (or,
   * with `resource`, when `rv` predates that resource's watch cache).
   */
  eventsSince(rv: number, resource?: string): StoredEvent[] | 'expired' {
    if (rv < this.oldestWatchableRv(resource)) return 'expired';
    return this.history.filter((e) => e.rv > rv);
  }

  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private emit(event: StoredEvent): void {
    this.history.push(event);
    while (this.history.length > this.historyWindow) {
      const dropped = this.history.shift();
      if (dropped) this.compacted = dropped.rv;
    }
    for (const listener of [...this.listeners]) listener(event);
  }
}
