// What each gateway serves, as the gateways report it: the port both halves share.
// A gateway writes a report after each swap of its route table (only what changed)
// and refreshes it before it expires; the operator reads it to tell whether a route
// is served by every live gateway (the trigger's Deployed condition), and listens to
// its change feed to look again without a spec change. A gateway that stops
// refreshing (it died, or lost Redis) stops counting when its report expires.
//
// Two adapters: memory (one process: the dev role, unit tests) and Redis (one hash of
// route key → generation per gateway, a sorted set of gateway ids scored by expiry).

/** How a gateway serves one route. */
export interface ServedRoute {
  /** The generation of the route record in its table. */
  generation: number;
  /** Its workflow is in the table too: a request would start an execution. */
  workflow: boolean;
}

/** One gateway's report: what changed since its previous one, or everything. */
export interface GatewayReport {
  /** The gateway's id, unique per process (its host name and a random suffix). */
  gateway: string;
  /** The route-table revision served: the number of table swaps since the gateway started. */
  revision: number;
  /**
   * Replace whatever this gateway reported before. A gateway's first report is full,
   * and so is any report after the store lost or expired the previous one.
   */
  full: boolean;
  /** Routes served that are new or changed: `[route key, how it is served]`. */
  serve: [string, ServedRoute][];
  /** Route keys no longer served (empty when `full`). */
  drop: string[];
  /** The report counts for this long unless refreshed. */
  ttlMs: number;
}

/** How one live gateway serves one route. */
export interface RouteServed {
  gateway: string;
  /** How it serves the route; undefined when it does not. */
  route: ServedRoute | undefined;
}

/** What the change feed tells: which routes to look at again. */
export type GatewayChange =
  /** What a gateway serves changed for these route keys. */
  | { kind: 'routes'; keys: string[] }
  /**
   * The set of live gateways changed (one started, stopped or expired), or one
   * gateway's report changed too much to list: every route may be affected.
   */
  | { kind: 'gateways' }
  /** The feed may have missed changes (it reconnected): look at everything again. */
  | { kind: 'resync' };

export type GatewayChangeListener = (change: GatewayChange) => void;

/** Reports of the gateways: written by each gateway, read by the operator. */
export interface GatewayStore {
  /**
   * Write a report. Resolves false, writing nothing, when a report that is not `full`
   * finds no live earlier report to apply to (it expired, or the store lost it): the
   * gateway then reports in full.
   */
  report(report: GatewayReport): Promise<boolean>;
  /**
   * Extend the life of the gateway's report by `ttlMs`. Resolves false when the store
   * no longer holds a live report: the gateway then reports in full.
   */
  refresh(gateway: string, ttlMs: number): Promise<boolean>;
  /** The gateway stops (graceful shutdown): it no longer counts. Idempotent. */
  remove(gateway: string): Promise<void>;
  /** For every live gateway (by id), how it serves `routeKey`. */
  served(routeKey: string): Promise<RouteServed[]>;
  /** The ids of the live gateways. */
  live(): Promise<string[]>;
  /**
   * Called after reports change what is served, and when the set of live gateways
   * changes (an expiry is noticed by polling). Returns the unsubscribe function.
   */
  subscribe(listener: GatewayChangeListener): () => void;
  /** Stop the change feed and its polling. */
  close(): void;
}

/** Route keys in one `routes` change at most; a larger change is announced as `gateways`. */
export const MAX_CHANGED_KEYS = 500;

/** The change a report announces, or undefined when it changes nothing that is served. */
export function changeOf(report: GatewayReport, joined: boolean): GatewayChange | undefined {
  if (joined || report.full) return { kind: 'gateways' };
  const keys = [...report.serve.map(([key]) => key), ...report.drop];
  if (keys.length === 0) return undefined;
  return keys.length > MAX_CHANGED_KEYS ? { kind: 'gateways' } : { kind: 'routes', keys };
}
