// The gateway's route table: our own find-my-way router over the route store,
// kept in step with the store's and the workflow registry's change feeds. (Fastify
// cannot add routes after listen, so it serves one wildcard route and asks this table.)
//
// Changes are applied key by key: the feed names the key that changed, the table reads
// just that record and updates the router in place, in one synchronous step after its
// reads (so a request sees the table before or after a change, never half of it). A
// new route is one router insertion; a route leaving or moving to another path makes a
// new router from the table's own entries (find-my-way removes routes by rebuilding);
// a record whose content is unchanged costs nothing. Only the first load, a feed that
// says "anything may have changed" (a reconnect) or `refresh()` read the whole store.
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

/** What the router stores for a path: replaced in place when the route changes. */
interface Slot {
  route: RouteRecord;
}

/** A route in the table: its record, a digest of its content, and its router slot. */
interface Entry {
  route: RouteRecord;
  digest: string;
  slot: Slot;
}

type Router = FindMyWay.Instance<FindMyWay.HTTPVersion.V1>;

interface Snapshot {
  router: Router;
  workflows: Map<string, WorkflowRegistration>;
  /** The routes served, by key (routes that lost a path conflict are not served). */
  entries: Map<string, Entry>;
}

/** Longest path parameter served (docs/errors.md: longer is 414 uri-too-long). */
export const MAX_PARAM_LENGTH = 500;

const newRouter = (): Router =>
  FindMyWay({ ignoreTrailingSlash: true, maxParamLength: MAX_PARAM_LENGTH });
const digestOf = (route: RouteRecord) => hash('sha1', JSON.stringify(route), 'base64');

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
  #snapshot: Snapshot = { router: newRouter(), workflows: new Map(), entries: new Map() };
  #unsubscribe: (() => void)[] = [];
  readonly #removedListeners = new Set<RouteRemovedListener>();
  readonly #swapListeners = new Set<SwapListener>();
  #revision = 0;
  #pending: Promise<void> | undefined;
  /** Everything must be read again (first load, reconnect, `refresh()`). */
  #dirtyAll = false;
  /** Keys the change feeds named since the last update. */
  readonly #dirtyRoutes = new Set<string>();
  readonly #dirtyWorkflows = new Set<string>();
  /** Routes skipped for a path another route holds: read again when a path is freed. */
  readonly #skipped = new Set<string>();
  /** A read failed: the store is read whole at the next change. */
  #stale = false;
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
    table.#unsubscribe.push(
      routes.subscribe((key) => void table.#changed(table.#dirtyRoutes, key)),
      workflows.subscribe((id) => void table.#changed(table.#dirtyWorkflows, id)),
    );
    const first = table.refresh();
    if (options.waitForFirstLoad ?? true) await first;
    return table;
  }

  /** Whether the table has loaded the stores at least once. */
  get loaded(): boolean {
    return this.#revision > 0;
  }

  /** Read both stores whole again. Calls that arrive during an update coalesce. */
  refresh(): Promise<void> {
    this.#dirtyAll = true;
    return this.#run();
  }

  #changed(dirty: Set<string>, key: string | undefined): Promise<void> {
    // After a failed read the change it was for is lost: the next one reads everything.
    if (key === undefined) this.#dirtyAll = true;
    else dirty.add(key);
    return this.#run();
  }

  #run(): Promise<void> {
    this.#pending ??= (async () => {
      while (this.#dirtyAll || this.#dirtyRoutes.size > 0 || this.#dirtyWorkflows.size > 0) {
        if (this.#dirtyAll || this.#stale) {
          this.#dirtyAll = false;
          this.#dirtyRoutes.clear();
          this.#dirtyWorkflows.clear();
          await this.#reload();
        } else {
          const routeKeys = [...this.#dirtyRoutes];
          const workflowIds = [...this.#dirtyWorkflows];
          this.#dirtyRoutes.clear();
          this.#dirtyWorkflows.clear();
          await this.#update(routeKeys, workflowIds);
        }
      }
      this.#pending = undefined;
    })();
    return this.#pending;
  }

  /** The whole stores read again, and a new snapshot swapped in. */
  async #reload(): Promise<void> {
    let next: Snapshot;
    try {
      next = await this.#build(this.#snapshot.entries);
    } catch (err) {
      // Keep serving the last good table; the next change reads everything again.
      this.#log('route table rebuild failed', { error: String(err) });
      this.#stale = true;
      return;
    }
    const previous = this.#snapshot;
    this.#snapshot = next;
    this.#stale = false;
    this.#revision++;
    this.#announceRemoved(
      [...previous.entries].filter(([key]) => !next.entries.has(key)).map(([, e]) => e.route),
    );
    this.#announceSwap();
  }

  /** The named records read again and applied to the snapshot in place. */
  async #update(routeKeys: string[], workflowIds: string[]): Promise<void> {
    let routes: (RouteRecord | undefined)[];
    let workflows: (WorkflowRegistration | undefined)[];
    try {
      [routes, workflows] = await Promise.all([
        Promise.all(routeKeys.map((key) => this.routes.get(key))),
        Promise.all(workflowIds.map((id) => this.workflows.get(id))),
      ]);
    } catch (err) {
      this.#log('route table update failed', { error: String(err) });
      this.#stale = true;
      return;
    }
    // From here on synchronous: requests see the table before or after, never between.
    const snapshot = this.#snapshot;
    workflowIds.forEach((id, i) => {
      const registration = workflows[i];
      if (registration) snapshot.workflows.set(id, registration);
      else snapshot.workflows.delete(id);
    });
    const removed: RouteRecord[] = [];
    let pathsFreed = false;
    routeKeys.forEach((key, i) => {
      const listed = routes[i];
      const held = snapshot.entries.get(key);
      if (!listed || listed.key !== key) {
        this.#skipped.delete(key);
        if (held) {
          snapshot.entries.delete(key);
          removed.push(held.route);
          pathsFreed = true;
        }
        return;
      }
      const digest = digestOf(listed);
      if (held?.digest === digest) return;
      if (held && held.route.path === listed.path) {
        // Same path: the router keeps its slot, the slot gets the new record.
        held.slot.route = listed;
        snapshot.entries.set(key, { route: listed, digest, slot: held.slot });
        return;
      }
      if (held) {
        // Moved to another path: the old one leaves with the next router.
        snapshot.entries.delete(key);
        pathsFreed = true;
      }
      const slot = { route: listed };
      if (this.#add(snapshot.router, slot))
        snapshot.entries.set(key, { route: listed, digest, slot });
      else this.#skipped.add(key);
    });
    if (pathsFreed) {
      // A route skipped for a path conflict may be served now: read it again.
      for (const key of this.#skipped) this.#dirtyRoutes.add(key);
      this.#skipped.clear();
      snapshot.router = this.#routerOf(snapshot.entries);
    }
    this.#revision++;
    this.#announceRemoved(removed);
    this.#announceSwap();
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
    return { route: (found.store as Slot).route, params };
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

  /** The route templates and workflow ids served now: the label values still current. */
  servedLabels(): { routes: Set<string>; workflows: Set<string> } {
    const { entries, workflows } = this.#snapshot;
    const routes = new Set<string>();
    for (const { route } of entries.values()) routes.add(route.path);
    return { routes, workflows: new Set(workflows.keys()) };
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

  #announceRemoved(removed: RouteRecord[]): void {
    if (this.#removedListeners.size === 0) return;
    for (const route of removed) {
      for (const listener of this.#removedListeners) {
        try {
          listener(route);
        } catch (err) {
          this.#log('route removal listener failed', { route: route.key, error: String(err) });
        }
      }
    }
  }

  /** Adds the slot's path to `router`; false (and logged) when the path is taken. */
  #add(router: Router, slot: Slot): boolean {
    try {
      // One method stands for the path: methods are checked by the pipeline, so it
      // can tell 404 (no such path) from 405 (path known, method not enabled).
      router.on('GET', slot.route.path, noop, slot);
      return true;
    } catch (err) {
      const { key, path } = slot.route;
      this.#log('route skipped', { route: key, path, error: String(err) });
      return false;
    }
  }

  /**
   * A router over `entries`, in their order (the first of two equal paths wins); an
   * entry whose path is taken leaves `entries` and waits in the skipped set.
   */
  #routerOf(entries: Map<string, Entry>): Router {
    const router = newRouter();
    for (const [key, entry] of entries) {
      if (!this.#add(router, entry.slot)) {
        entries.delete(key);
        this.#skipped.add(key);
      }
    }
    return router;
  }

  /**
   * The next snapshot, from the whole stores. A route whose record content is unchanged
   * keeps the record object of `previous`, and with it the state kept for that object.
   */
  async #build(previous: Map<string, Entry>): Promise<Snapshot> {
    const [routes, workflows] = await Promise.all([this.routes.list(), this.workflows.list()]);
    const entries = new Map<string, Entry>();
    this.#skipped.clear();
    // Routes already served first (a path stays with the route that holds it), then
    // by key.
    const incumbent = (r: RouteRecord) => (previous.has(r.key) ? 0 : 1);
    routes.sort((a, b) => incumbent(a) - incumbent(b) || a.key.localeCompare(b.key));
    for (const listed of routes) {
      const digest = digestOf(listed);
      const kept = previous.get(listed.key);
      const route = kept?.digest === digest ? kept.route : listed;
      entries.set(route.key, { route, digest, slot: { route } });
    }
    const router = this.#routerOf(entries);
    return { router, workflows: new Map(workflows.map((w) => [w.workflowId, w])), entries };
  }
}
