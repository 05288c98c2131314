// The operator process's lifecycle around leader election, after controller-runtime's
// manager (O9, O10):
//
// - With leader election, the leader-only work (the resource source and the
//   controllers) starts when this replica acquires the Lease.
// - Losing the Lease ends the process at once, without draining: another replica may
//   already be leading, and there is no fencing. `onLostLeadership` defaults to exit(1).
//   Until then, the leader work can ask before a write only the leader may make: the
//   `Leadership` handed to it reads the Lease (leader-election.ts confirmLeadership).
// - `shutdown()` (SIGTERM) stops taking keys and drains in-flight reconciles within
//   `drainTimeoutMs`, then releases the Lease (empty holder, 1 s) so the next replica
//   takes over at once. The default budget keeps the whole sequence inside Kubernetes'
//   default terminationGracePeriodSeconds of 30 s.
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import type { KubeClient } from './kube-client.ts';
import {
  LeaderElector,
  LeaseLock,
  SOLE_LEADER,
  type LeaderElectionConfig,
  type Leadership,
  type ResourceLock,
} from './leader-election.ts';
import type { OperatorMetrics } from './metrics.ts';
import { realClock, type Clock } from './clock.ts';

/** What the leader runs: anything that can be stopped with a drain budget. */
export interface Stoppable {
  stop(drainTimeoutMs?: number): Promise<void>;
}

export interface LeaderElectionSettings {
  /** The Lease: a ResourceLock (tests) or where to find it. */
  lock: ResourceLock | { client: KubeClient; namespace: string; name: string };
  /** Defaults to `<hostname>_<uuid>`, as client-go's examples do. */
  identity?: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  clock?: LeaderElectionConfig['clock'];
}

export interface ManagerOptions {
  /**
   * Start the leader-only work. Resolves once it runs (after the source synced).
   * `signal` aborts when leadership ends; `leadership` confirms it, read from the
   * Lease, before a write only the leader may make (always confirmed without leader
   * election).
   */
  startLeading: (signal: AbortSignal, leadership: Leadership) => Promise<Stoppable>;
  /** Omit (or false) to run without leader election (one replica, or dev). */
  leaderElection?: LeaderElectionSettings | false;
  /**
   * Drain budget for `shutdown()`, starting the work included. Default 20 s: the
   * process exits by force 25 s after SIGTERM (roles/lifecycle.ts), and the Lease must
   * be released before that, or the next replica waits out a whole LeaseDuration.
   */
  drainTimeoutMs?: number;
  /** Called when the Lease is lost while running. Default: process.exit(1). */
  onLostLeadership?: () => void;
  metrics?: OperatorMetrics;
  /** Name of the leader gauge's `name` label. Default the Lease name or `hookgate`. */
  name?: string;
  log?: (msg: string, fields?: object) => void;
  /**
   * Time for the drain budget. Default the wall clock; tests inject a FakeClock. (The
   * Lease's timing follows `leaderElection.clock`.)
   */
  clock?: Clock;
}

export const DEFAULT_SHUTDOWN_DRAIN_MS = 20_000;

export class Manager {
  readonly #o: ManagerOptions;
  readonly #log: (msg: string, fields?: object) => void;
  #elector: LeaderElector | undefined;
  #work: Promise<Stoppable | undefined> | undefined;
  #identity: string | undefined;
  #shuttingDown = false;
  #started = false;

  constructor(options: ManagerOptions) {
    this.#o = options;
    this.#log = options.log ?? (() => {});
  }

  /** The identity this replica campaigns with (undefined without leader election). */
  get identity(): string | undefined {
    return this.#identity;
  }

  /** Begin: campaign for the Lease, or start the work at once without leader election. */
  start(): void {
    if (this.#started) throw new Error('manager already started');
    this.#started = true;
    const le = this.#o.leaderElection;
    if (!le) {
      this.#work = this.#startWork(new AbortController().signal, SOLE_LEADER);
      return;
    }
    const lock =
      'get' in le.lock ? le.lock : new LeaseLock(le.lock.client, le.lock.namespace, le.lock.name);
    const name = this.#o.name ?? ('name' in le.lock ? le.lock.name : 'hookgate');
    this.#identity = le.identity ?? `${hostname()}_${randomUUID()}`;
    const elector: LeaderElector = new LeaderElector({
      lock,
      identity: this.#identity,
      ...(le.leaseDurationMs !== undefined ? { leaseDurationMs: le.leaseDurationMs } : {}),
      ...(le.renewDeadlineMs !== undefined ? { renewDeadlineMs: le.renewDeadlineMs } : {}),
      ...(le.retryPeriodMs !== undefined ? { retryPeriodMs: le.retryPeriodMs } : {}),
      ...(le.clock ? { clock: le.clock } : {}),
      log: this.#log,
      onLeaderStatus: (leading) => this.#o.metrics?.isLeader.set({ name }, leading ? 1 : 0),
      onStartedLeading: (signal) => {
        this.#work = this.#startWork(signal, { confirm: () => elector.confirmLeadership() });
      },
      onStoppedLeading: () => {
        if (this.#shuttingDown) return;
        this.#log('leader election lost; exiting without drain', { identity: this.#identity });
        (this.#o.onLostLeadership ?? (() => process.exit(1)))();
      },
    });
    this.#elector = elector;
    void elector.run();
  }

  /**
   * Graceful stop (SIGTERM): stop the leader work with the drain budget, then release
   * the Lease. Safe to call more than once.
   */
  async shutdown(): Promise<void> {
    if (this.#shuttingDown) return;
    this.#shuttingDown = true;
    const drainMs = this.#o.drainTimeoutMs ?? DEFAULT_SHUTDOWN_DRAIN_MS;
    const clock = this.#o.clock ?? realClock;
    const deadline = clock.now() + drainMs;
    // Work still starting (the initial sync may take minutes against a slow API
    // server) is not waited for past the budget: the Lease is released all the same.
    const work = await withinMs(this.#work, drainMs, clock);
    if (work) {
      const timeoutMs = Math.max(0, deadline - clock.now());
      this.#log('draining', { timeoutMs });
      await work.stop(timeoutMs);
    } else if (this.#work) {
      this.#log('leader work still starting at shutdown; releasing the Lease', { drainMs });
      // Should it start after all, it stops at once: it must not reconcile beside the
      // next leader until the process exits.
      void this.#work.then((late) => late?.stop(0)).catch(() => {});
    }
    await this.#elector?.stop();
    this.#log('manager stopped');
  }

  async #startWork(signal: AbortSignal, leadership: Leadership): Promise<Stoppable | undefined> {
    try {
      return await this.#o.startLeading(signal, leadership);
    } catch (err) {
      this.#log('leader work failed to start', {
        error: err instanceof Error ? err.message : String(err),
      });
      if (!this.#shuttingDown) (this.#o.onLostLeadership ?? (() => process.exit(1)))();
      return undefined;
    }
  }
}

/** `promise`'s value, or undefined once `ms` has passed without it. */
async function withinMs<T>(
  promise: Promise<T> | undefined,
  ms: number,
  clock: Clock,
): Promise<T | undefined> {
  if (!promise) return undefined;
  let cancel: (() => void) | undefined;
  const late = new Promise<undefined>((resolve) => {
    cancel = clock.setTimer(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    cancel?.();
  }
}
