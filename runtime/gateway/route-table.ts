// The gateway's route table: our own find-my-way router over the route store,
// rebuilt and swapped atomically whenever the store or the workflow registry
// changes. (Fastify cannot add routes after listen, so it serves one wildcard route
// and asks this table.)
//
// The route lifecycle: a route's record object enters the table when the route is
// deployed and stays the same object, rebuild after rebuild, until the route changes
// (a new generation, new credentials: any other record content) or leaves. Per-route
// state (compiled schemas, JWT keys, introspection answers) is kept in WeakMaps keyed
// by that object, so it lives exactly as long as the table (or a request still in
// flight) holds the record, and lookups are one WeakMap get. State kept by route key
// instead (the rate limiter's counts, which carry over to a route's next generation)
// is dropped by listeners the table tells when a route leaves (`onRemoved`).
import { hash } from 'node:crypto';
import FindMyWay from 'find-my-way';
import type {
  RouteRecord,
  RouteStore,
  WorkflowRegistration,
  WorkflowRegistry,
} from '../../api/records/records.ts';

export interface RouteMatch {
  route: RouteRecord;
  params: Record<string, string>;
}

/** A route in the table: its record, and a digest of the content it was made from. */
interface Entry {
  route: RouteRecord;
  digest: string;
}

interface Snapshot {
  router: FindMyWay.Instance<FindMyWay.HTTPVersion.V1>;
  workflows: Map<string, WorkflowRegistration>;
  /** The routes served, by key (routes that lost a path conflict are not served). */
  entries: Map<string, Entry>;
}

/** Told about every route that leaves the table (deleted, undeployed, path taken). */
export type RouteRemovedListener = (route: RouteRecord) => void;

/** Told after each swap of the table (the gateway's report of what it serves). */
export type SwapListener = () => void;

const noop = () => {};

/** The path of a request URL, without its query string. */
export function pathOf(url: string): string {
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
}

export class RouteTable {
  #snapshot: Snapshot = { router: FindMyWay(), workflows: new Map(), entries: new Map() };
  #unsubscribe: (() => void)[] = [];
  readonly #removedListeners = new Set<RouteRemovedListener>();
  readonly #swapListeners = new Set<SwapListener>();
  #revision = 0;
  #pending: Promise<void> | undefined;
  #dirty = false;
  readonly #log: (message: string, fields?: Record<string, unknown>) => void;
  readonly routes: RouteStore;
  readonly workflows: WorkflowRegistry;

  private constructor(
    routes: RouteStore,
    workflows: WorkflowRegistry,
    log?: (message: string, fields?: Record<string, unknown>) => void,
  ) {
    this.routes = routes;
    this.workflows = workflows;
    this.#log = log ?? noop;
  }

  /**
   * A table over the stores, following their change feeds. Resolves once the first
   * load is done, unless `waitForFirstLoad` is false: a gateway whose Redis is down
   * at start-up listens anyway and reports not-ready (`loaded`) until it loads.
   */
  static async create(
    routes: RouteStore,
    workflows: WorkflowRegistry,
    log?: (message: string, fields?: Record<string, unknown>) => void,
    options: { waitForFirstLoad?: boolean } = {},
  ): Promise<RouteTable> {
    const table = new RouteTable(routes, workflows, log);
    const onChange = () => table.refresh();
    table.#unsubscribe.push(routes.subscribe(onChange), workflows.subscribe(onChange));
    const first = table.refresh();
    if (options.waitForFirstLoad ?? true) await first;
    return table;
  }

  /** Whether the table has loaded the stores at least once. */
  get loaded(): boolean {
    return this.#revision > 0;
  }

  /** Rebuild from the stores. Calls that arrive during a rebuild coalesce into one more. */
  refresh(): Promise<void> {
    this.#dirty = true;
    this.#pending ??= (async () => {
      while (this.#dirty) {
        this.#dirty = false;
        let next: Snapshot;
        try {
          next = await this.#build(this.#snapshot.entries);
        } catch (err) {
          // Keep serving the last good table; the next change retries.
          this.#log('route table rebuild failed', { error: String(err) });
          continue;
        }
        const previous = this.#snapshot;
        this.#snapshot = next;
        this.#revision++;
        this.#announceRemoved(previous.entries, next.entries);
        this.#announceSwap();
      }
      this.#pending = undefined;
    })();
    return this.#pending;
  }

  /** The route serving `path` (without query string), with its path parameters. */
  match(path: string): RouteMatch | undefined {
    const found = this.#snapshot.router.find('GET', path);
    if (!found) return undefined;
    const params: Record<string, string> = {};
    for (const k in found.params) {
      const v = found.params[k];
      if (v !== undefined) params[k] = v;
    }
    return { route: found.store as RouteRecord, params };
  }

  workflow(workflowId: string): WorkflowRegistration | undefined {
    return this.#snapshot.workflows.get(workflowId);
  }

  get size(): number {
    return this.#snapshot.entries.size;
  }

  /** The number of swaps since the table was made. */
  get revision(): number {
    return this.#revision;
  }

  /** What the table serves: route key → the generation, and whether its workflow is known. */
  served(): Map<string, { generation: number; workflow: boolean }> {
    const { entries, workflows } = this.#snapshot;
    const served = new Map<string, { generation: number; workflow: boolean }>();
    for (const [key, { route }] of entries) {
      served.set(key, { generation: route.generation, workflow: workflows.has(route.workflowId) });
    }
    return served;
  }

  /** Calls `listener` after each swap. Returns the function that stops the calls. */
  onSwap(listener: SwapListener): () => void {
    this.#swapListeners.add(listener);
    return () => this.#swapListeners.delete(listener);
  }

  /**
   * Calls `listener` with the record of every route that leaves the table, after the
   * table without it is in place. Returns the function that stops the calls.
   */
  onRemoved(listener: RouteRemovedListener): () => void {
    this.#removedListeners.add(listener);
    return () => this.#removedListeners.delete(listener);
  }

  close(): void {
    for (const u of this.#unsubscribe) u();
    this.#unsubscribe = [];
    this.#removedListeners.clear();
    this.#swapListeners.clear();
  }

  #announceSwap(): void {
    for (const listener of this.#swapListeners) {
      try {
        listener();
      } catch (err) {
        this.#log('swap listener failed', { error: String(err) });
      }
    }
  }

  #announceRemoved(before: Map<string, Entry>, after: Map<string, Entry>): void {
    if (this.#removedListeners.size === 0) return;
    for (const [key, { route }] of before) {
      if (after.has(key)) continue;
      for (const listener of this.#removedListeners) {
        try {
          listener(route);
        } catch (err) {
          this.#log('route removal listener failed', { route: key, error: String(err) });
        }
      }
    }
  }

  /**
   * The next snapshot. A route whose record content is unchanged keeps the record
   * object of `previous`, and with it the state kept for that object.
   */
  async #build(previous: Map<string, Entry>): Promise<Snapshot> {
    const [routes, workflows] = await Promise.all([this.routes.list(), this.workflows.list()]);
    const router = FindMyWay({ ignoreTrailingSlash: true, maxParamLength: 256 });
    const entries = new Map<string, Entry>();
    for (const listed of routes.sort((a, b) => a.key.localeCompare(b.key))) {
      const digest = hash('sha1', JSON.stringify(listed), 'base64');
      const kept = previous.get(listed.key);
      const route = kept?.digest === digest ? kept.route : listed;
      try {
        // One method stands for the path: methods are checked by the pipeline, so it
        // can tell 404 (no such path) from 405 (path known, method not enabled).
        router.on('GET', route.path, noop, route);
        entries.set(route.key, { route, digest });
      } catch (err) {
        this.#log('route skipped', { route: route.key, path: route.path, error: String(err) });
      }
    }
    return { router, workflows: new Map(workflows.map((w) => [w.workflowId, w])), entries };
  }
}
