// The gateway's route table: our own find-my-way router over the route store,
// rebuilt and swapped atomically whenever the store or the workflow registry
// changes. (Fastify cannot add routes after listen, so it serves one wildcard route
// and asks this table.)
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

interface Snapshot {
  router: FindMyWay.Instance<FindMyWay.HTTPVersion.V1>;
  workflows: Map<string, WorkflowRegistration>;
  size: number;
}

const noop = () => {};

/** The path of a request URL, without its query string. */
export function pathOf(url: string): string {
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
}

export class RouteTable {
  #snapshot: Snapshot = { router: FindMyWay(), workflows: new Map(), size: 0 };
  #unsubscribe: (() => void)[] = [];
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

  static async create(
    routes: RouteStore,
    workflows: WorkflowRegistry,
    log?: (message: string, fields?: Record<string, unknown>) => void,
  ): Promise<RouteTable> {
    const table = new RouteTable(routes, workflows, log);
    const onChange = () => table.refresh();
    table.#unsubscribe.push(routes.subscribe(onChange), workflows.subscribe(onChange));
    await table.refresh();
    return table;
  }

  /** Rebuild from the stores. Calls that arrive during a rebuild coalesce into one more. */
  refresh(): Promise<void> {
    this.#dirty = true;
    this.#pending ??= (async () => {
      while (this.#dirty) {
        this.#dirty = false;
        try {
          this.#snapshot = await this.#build();
        } catch (err) {
          // Keep serving the last good table; the next change retries.
          this.#log('route table rebuild failed', { error: String(err) });
        }
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
    return this.#snapshot.size;
  }

  close(): void {
    for (const u of this.#unsubscribe) u();
    this.#unsubscribe = [];
  }

  async #build(): Promise<Snapshot> {
    const [routes, workflows] = await Promise.all([this.routes.list(), this.workflows.list()]);
    const router = FindMyWay({ ignoreTrailingSlash: true, maxParamLength: 256 });
    let size = 0;
    for (const route of routes.sort((a, b) => a.key.localeCompare(b.key))) {
      try {
        // One method stands for the path: methods are checked by the pipeline, so it
        // can tell 404 (no such path) from 405 (path known, method not enabled).
        router.on('GET', route.path, noop, route);
        size++;
      } catch (err) {
        this.#log('route skipped', { route: route.key, path: route.path, error: String(err) });
      }
    }
    return { router, workflows: new Map(workflows.map((w) => [w.workflowId, w])), size };
  }
}
