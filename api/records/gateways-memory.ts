// In-memory adapter of the gateway reports: one process (the dev role's in-process
// gateway and reconcile loop), unit tests. Expiry is checked on every read and by a
// poll while someone listens, as in Redis.
import {
  changeOf,
  type GatewayChange,
  type GatewayChangeListener,
  type GatewayReport,
  type GatewayStore,
  type RouteServed,
  type ServedRoute,
} from './gateways.ts';

export interface MemoryGatewayStoreOptions {
  /** Milliseconds since the epoch; Date.now by default (tests move it). */
  now?: () => number;
  /** How often expiries are looked for while someone listens. Default 1000 ms. */
  pollMs?: number;
}

interface Held {
  revision: number;
  routes: Map<string, ServedRoute>;
  expiresAt: number;
}

export class MemoryGatewayStore implements GatewayStore {
  readonly #gateways = new Map<string, Held>();
  readonly #listeners = new Set<GatewayChangeListener>();
  readonly #now: () => number;
  readonly #pollMs: number;
  #timer: NodeJS.Timeout | undefined;
  /** The live ids as last announced (the poll compares with it). */
  #members = '';

  constructor(options: MemoryGatewayStoreOptions = {}) {
    this.#now = options.now ?? Date.now;
    this.#pollMs = options.pollMs ?? 1000;
  }

  report(report: GatewayReport): Promise<boolean> {
    const held = this.#alive(report.gateway);
    if (!held && !report.full) return Promise.resolve(false);
    const routes = report.full || !held ? new Map<string, ServedRoute>() : held.routes;
    for (const [key, served] of report.serve) routes.set(key, { ...served });
    if (!report.full) for (const key of report.drop) routes.delete(key);
    this.#gateways.set(report.gateway, {
      revision: report.revision,
      routes,
      expiresAt: this.#now() + report.ttlMs,
    });
    const change = changeOf(report, !held);
    if (change?.kind === 'gateways') this.#members = this.#liveIds().join('\n');
    if (change) this.#notify(change);
    return Promise.resolve(true);
  }

  refresh(gateway: string, ttlMs: number): Promise<boolean> {
    const held = this.#alive(gateway);
    if (held) held.expiresAt = this.#now() + ttlMs;
    return Promise.resolve(held !== undefined);
  }

  remove(gateway: string): Promise<void> {
    const held = this.#alive(gateway);
    this.#gateways.delete(gateway);
    if (held) {
      this.#members = this.#liveIds().join('\n');
      this.#notify({ kind: 'gateways' });
    }
    return Promise.resolve();
  }

  served(routeKey: string): Promise<RouteServed[]> {
    const served: RouteServed[] = [];
    for (const id of this.#liveIds()) {
      const route = this.#gateways.get(id)?.routes.get(routeKey);
      served.push({ gateway: id, route: route && { ...route } });
    }
    return Promise.resolve(served);
  }

  live(): Promise<string[]> {
    return Promise.resolve(this.#liveIds());
  }

  /** The revision a live gateway last reported (tests, diagnostics). */
  revision(gateway: string): number | undefined {
    return this.#alive(gateway)?.revision;
  }

  subscribe(listener: GatewayChangeListener): () => void {
    this.#listeners.add(listener);
    if (!this.#timer) {
      this.#members = this.#liveIds().join('\n');
      this.#timer = setInterval(() => this.poll(), this.#pollMs);
      this.#timer.unref();
    }
    return () => {
      this.#listeners.delete(listener);
      if (this.#listeners.size === 0) this.#stopPolling();
    };
  }

  /** Look for expired gateways now (the timer does it every `pollMs`). */
  poll(): void {
    const members = this.#liveIds().join('\n');
    for (const [id, held] of this.#gateways) {
      if (held.expiresAt <= this.#now()) this.#gateways.delete(id);
    }
    if (members === this.#members) return;
    this.#members = members;
    this.#notify({ kind: 'gateways' });
  }

  close(): void {
    this.#listeners.clear();
    this.#stopPolling();
  }

  #stopPolling(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  #alive(gateway: string): Held | undefined {
    const held = this.#gateways.get(gateway);
    return held && held.expiresAt > this.#now() ? held : undefined;
  }

  #liveIds(): string[] {
    return [...this.#gateways.keys()].filter((id) => this.#alive(id)).sort();
  }

  #notify(change: GatewayChange): void {
    for (const listener of [...this.#listeners]) listener(change);
  }
}
