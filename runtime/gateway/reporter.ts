// The gateway's report of what it serves (api/records/gateways.ts): after each swap of
// the route table, the routes whose served generation changed; every third of the TTL,
// a refresh of the report's expiry. The operator counts a gateway only while its
// report is live, and sets a trigger's Deployed condition from what they serve.
//
// Nothing is reported before `start()`: a gateway process starts reporting once it
// listens, so a trigger is never Ready before a request to it could be served.
// Writes are one at a time; swaps during a write coalesce into one more. A failed
// write (Redis down) or a report the store no longer holds (expired, lost) is
// followed by a full report on the next attempt.
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { GatewayReport, GatewayStore, ServedRoute } from '../../api/records/gateways.ts';

/** What the reporter reads of the route table. */
export interface ServedTable {
  readonly revision: number;
  served(): Map<string, ServedRoute>;
  onSwap(listener: () => void): () => void;
}

export interface GatewayReporterOptions {
  store: GatewayStore;
  table: ServedTable;
  /** Unique per process; the host name (a pod's name) and a random suffix by default. */
  id?: string;
  /** How long a report counts unless refreshed. Default 15 s; refreshed every third. */
  ttlMs?: number;
  log?: (message: string, fields?: Record<string, unknown>) => void;
}

export const DEFAULT_GATEWAY_TTL_MS = 15_000;

export class GatewayReporter {
  readonly id: string;
  readonly #store: GatewayStore;
  readonly #table: ServedTable;
  readonly #ttlMs: number;
  readonly #log: NonNullable<GatewayReporterOptions['log']>;
  /** What the store holds for this gateway; undefined: report in full next. */
  #reported: Map<string, ServedRoute> | undefined;
  #revision = -1;
  #pending: Promise<void> | undefined;
  #dirty = false;
  #refreshing = false;
  #started = false;
  #closed = false;
  #timer: NodeJS.Timeout | undefined;
  readonly #unsubscribe: () => void;

  constructor(options: GatewayReporterOptions) {
    this.id = options.id ?? `${hostname()}-${randomBytes(4).toString('hex')}`;
    this.#store = options.store;
    this.#table = options.table;
    this.#ttlMs = options.ttlMs ?? DEFAULT_GATEWAY_TTL_MS;
    this.#log = options.log ?? (() => {});
    this.#unsubscribe = this.#table.onSwap(() => void this.report());
  }

  /** Start reporting: the first report, then one after each swap and a refresh every third of the TTL. */
  start(): Promise<void> {
    if (!this.#started && !this.#closed) {
      this.#started = true;
      this.#timer = setInterval(() => void this.#refresh(), Math.max(1, this.#ttlMs / 3));
      this.#timer.unref();
    }
    return this.report();
  }

  /** Report what the table serves now, if it changed. Resolves when written (or failed). */
  report(): Promise<void> {
    if (this.#closed || !this.#started) return Promise.resolve();
    this.#dirty = true;
    this.#pending ??= (async () => {
      while (this.#dirty && !this.#closed) {
        this.#dirty = false;
        await this.#write();
      }
      this.#pending = undefined;
    })();
    return this.#pending;
  }

  /** Stop reporting and withdraw the report (graceful shutdown): this gateway no longer counts. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#timer);
    this.#unsubscribe();
    await this.#pending;
    if (!this.#started) return;
    try {
      await this.#store.remove(this.id);
    } catch (err) {
      this.#log('gateway report not withdrawn; it expires instead', { error: String(err) });
    }
  }

  async #write(): Promise<void> {
    const served = this.#table.served();
    const revision = this.#table.revision;
    const previous = this.#reported;
    const report: GatewayReport = {
      gateway: this.id,
      revision,
      full: previous === undefined,
      serve: [],
      drop: [],
      ttlMs: this.#ttlMs,
    };
    for (const [key, route] of served) {
      const was = previous?.get(key);
      if (was?.generation !== route.generation || was.workflow !== route.workflow)
        report.serve.push([key, route]);
    }
    if (previous) for (const key of previous.keys()) if (!served.has(key)) report.drop.push(key);
    if (!report.full && revision === this.#revision && !report.serve.length && !report.drop.length)
      return;
    try {
      if (await this.#store.report(report)) {
        this.#reported = served;
        this.#revision = revision;
        return;
      }
      // The store no longer holds the earlier report: everything, at once.
      this.#reported = undefined;
      this.#dirty = true;
    } catch (err) {
      this.#reported = undefined;
      this.#log('gateway report failed; retried in full', { error: String(err) });
    }
  }

  async #refresh(): Promise<void> {
    if (this.#refreshing || this.#closed) return;
    this.#refreshing = true;
    try {
      if (this.#reported && (await this.#store.refresh(this.id, this.#ttlMs))) return;
      this.#reported = undefined;
      await this.report();
    } catch (err) {
      this.#reported = undefined;
      this.#log('gateway report refresh failed', { error: String(err) });
    } finally {
      this.#refreshing = false;
    }
  }
}
