// Leader election on a coordination.k8s.io/v1 Lease: a port of client-go's
// tools/leaderelection (leaderelection.go + resourcelock/leaselock.go).
//
// - A candidate acquires the Lease when it does not exist, when it holds it already,
//   or when the record it last observed has not changed for a whole LeaseDuration
//   measured on the *local* clock (clocks of different nodes are never compared).
// - Every write is a replace carrying the resourceVersion of the last read; a 409
//   means another replica wrote first, and this attempt fails.
// - The leader renews every RetryPeriod; when a renewal round has not succeeded within
//   RenewDeadline it stops leading (the signal passed to onStartedLeading is aborted and
//   onStoppedLeading runs). It stops at once, without waiting for the deadline, when a
//   round reads the Lease held by another replica whose lease is still valid (a leader
//   frozen past LeaseDuration, then resumed): client-go retries until the deadline, but
//   the Lease cannot come back before RenewDeadline, and the work would go on writing
//   beside the new leader meanwhile. There is no fencing: writes done by the operator
//   must stay conflict-safe on their own.
// - A write that only the leader may make and that nothing else makes conflict-safe
//   (the orphan sweep's deletes) asks first: `confirmLeadership()` reads the Lease from
//   the API server and rejects with LeadershipLostError unless it is still this
//   replica's, and a read that shows another holder (or none) ends the leadership at
//   once, as a renewal round reading it would. A Lease that still names this replica
//   confirms only while it is within its lease duration, by two measures: the local
//   monotonic time since this replica's last successful renewal was *sent* (client-go
//   starts its count when the answer arrives, later than the server applied the
//   write; a candidate counts from when it saw the write, so from the send on is the
//   safe side), and the record's renewTime against this replica's wall clock (the
//   record is this replica's own, so no two clocks are compared). Past it, another
//   replica may take the Lease at any moment: LeaseExpiredError, which does not end the
//   leadership (a renewal that gets through makes the Lease valid again; the renewal
//   rounds decide). This narrows the window a lost leader has to act in (the time
//   between its last renewal and the next round, or a freeze) to one read and one
//   write; it is not a fencing token the store itself checks.
// - `stop()` with releaseOnCancel writes an empty holder with leaseDurationSeconds=1,
//   so the next candidate takes over after about one second instead of LeaseDuration.
import { realClock, type Clock } from './clock.ts';
import { KubeApiError, isNotFound, type KubeClient } from './kube-client.ts';

/** client-go's LeaderElectionRecord, as stored in the Lease spec. */
export interface LeaderElectionRecord {
  holderIdentity: string;
  leaseDurationSeconds: number;
  /** RFC 3339 with microseconds (MicroTime). */
  acquireTime: string;
  renewTime: string;
  leaderTransitions: number;
}

/** Where the record lives (client-go resourcelock.Interface). */
export interface ResourceLock {
  /** The current record and its raw form, or undefined when the lock object does not exist. */
  get(signal: AbortSignal): Promise<{ record: LeaderElectionRecord; raw: string } | undefined>;
  create(record: LeaderElectionRecord, signal: AbortSignal): Promise<void>;
  /** Replace the record, conditional on the version last read; throws on conflict. */
  update(record: LeaderElectionRecord, signal: AbortSignal): Promise<void>;
  /**
   * The current record, like `get`, but without changing the version the next
   * `update` is conditional on: a check, not a step of acquiring or renewing.
   */
  read(signal: AbortSignal): Promise<LeaderElectionRecord | undefined>;
  describe(): string;
}

/** This replica no longer leads: it must not make a leader's writes. */
export class LeadershipLostError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'LeadershipLostError';
  }
}

/**
 * The Lease still names this replica, but its last renewal is older than the lease
 * duration: another replica may take it at any moment, so a leader's write must wait.
 * Not a LeadershipLostError: leadership goes on until the renewal rounds say otherwise,
 * and a renewal that gets through makes the Lease confirm again.
 */
export class LeaseExpiredError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'LeaseExpiredError';
  }
}

/** Asked right before a write only the leader may make. */
export interface Leadership {
  /**
   * Resolves when the Lease, read from the API server now, still names this replica
   * and was renewed within its lease duration; rejects with LeadershipLostError when
   * it does not name it (the replica then stops leading), with LeaseExpiredError when
   * it does but its last renewal is too old, with another error when it cannot tell
   * (the API server unreachable).
   */
  confirm(): Promise<void>;
}

/** Without leader election (one process): always leading. */
export const SOLE_LEADER: Leadership = { confirm: () => Promise.resolve() };

interface LeaseObject {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; namespace: string; resourceVersion?: string };
  spec?: {
    holderIdentity?: string | null;
    leaseDurationSeconds?: number | null;
    acquireTime?: string | null;
    renewTime?: string | null;
    leaseTransitions?: number | null;
  };
}

/** Format a time as a Kubernetes MicroTime (RFC 3339, six fractional digits, UTC). */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

function recordFromLease(lease: LeaseObject): LeaderElectionRecord {
  const s = lease.spec ?? {};
  return {
    holderIdentity: s.holderIdentity ?? '',
    leaseDurationSeconds: s.leaseDurationSeconds ?? 0,
    acquireTime: s.acquireTime ?? '',
    renewTime: s.renewTime ?? '',
    leaderTransitions: s.leaseTransitions ?? 0,
  };
}

function leaseSpec(r: LeaderElectionRecord): NonNullable<LeaseObject['spec']> {
  return {
    holderIdentity: r.holderIdentity,
    leaseDurationSeconds: r.leaseDurationSeconds,
    ...(r.acquireTime ? { acquireTime: r.acquireTime } : {}),
    ...(r.renewTime ? { renewTime: r.renewTime } : {}),
    leaseTransitions: r.leaderTransitions,
  };
}

/** A Lease in one namespace, read and replaced through the coordination.k8s.io/v1 API. */
export class LeaseLock implements ResourceLock {
  readonly #client: KubeClient;
  readonly namespace: string;
  readonly name: string;
  #lease: LeaseObject | undefined;

  constructor(client: KubeClient, namespace: string, name: string) {
    this.#client = client;
    this.namespace = namespace;
    this.name = name;
  }

  #path(name?: string): string {
    const base = `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(this.namespace)}/leases`;
    return name === undefined ? base : `${base}/${encodeURIComponent(name)}`;
  }

  async get(signal: AbortSignal) {
    const lease = await this.#fetch(signal);
    if (!lease) return undefined;
    this.#lease = lease;
    const record = recordFromLease(lease);
    return { record, raw: JSON.stringify(record) };
  }

  async read(signal: AbortSignal): Promise<LeaderElectionRecord | undefined> {
    const lease = await this.#fetch(signal);
    return lease && recordFromLease(lease);
  }

  async #fetch(signal: AbortSignal): Promise<LeaseObject | undefined> {
    try {
      return await this.#client.request<LeaseObject>('GET', this.#path(this.name), { signal });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async create(record: LeaderElectionRecord, signal: AbortSignal): Promise<void> {
    this.#lease = await this.#client.request<LeaseObject>('POST', this.#path(), {
      signal,
      body: {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: { name: this.name, namespace: this.namespace },
        spec: leaseSpec(record),
      },
    });
  }

  async update(record: LeaderElectionRecord, signal: AbortSignal): Promise<void> {
    if (!this.#lease) throw new Error('lease not initialized, call get or create first');
    const body: LeaseObject = { ...this.#lease, spec: leaseSpec(record) };
    this.#lease = await this.#client.request<LeaseObject>('PUT', this.#path(this.name), {
      signal,
      body,
    });
  }

  describe(): string {
    return `${this.namespace}/${this.name}`;
  }
}

export interface LeaderElectionConfig {
  lock: ResourceLock;
  /** Unique per replica, e.g. `<pod name>_<random>`. */
  identity: string;
  /** How long a non-leader waits after the last observed change before taking over. Default 15 s. */
  leaseDurationMs?: number;
  /** How long the leader keeps retrying a renewal before giving up. Default 10 s. */
  renewDeadlineMs?: number;
  /** Interval between attempts. Default 2 s. */
  retryPeriodMs?: number;
  /** On `stop()`, write an empty holder so another replica can take over at once. Default true. */
  releaseOnCancel?: boolean;
  /** Called when this replica becomes leader. `signal` aborts when it stops leading. */
  onStartedLeading: (signal: AbortSignal) => void | Promise<void>;
  /** Called when this replica stops leading (lost the lease, or stopped). Not called if it never led. */
  onStoppedLeading?: () => void;
  /** Called when the observed leader changes (including to this replica). */
  onNewLeader?: (identity: string) => void;
  clock?: Clock;
  /** Wall time (ms since the epoch) for the record's acquireTime/renewTime. Default Date.now. */
  wallTime?: () => number;
  /** Random source for the acquire jitter, in [0, 1). */
  random?: () => number;
  log?: (msg: string, fields?: object) => void;
  /** Gauge hook (1 while leading). */
  onLeaderStatus?: (leading: boolean) => void;
}

/** What one attempt on the Lease came to (see #tryAcquireOrRenew). */
type Attempt = 'ours' | 'taken' | 'failed';

/** client-go's JitterFactor: acquire retries wait RetryPeriod·(1 + rand·1.2). */
export const JITTER_FACTOR = 1.2;
export const DEFAULT_LEASE_DURATION_MS = 15_000;
export const DEFAULT_RENEW_DEADLINE_MS = 10_000;
export const DEFAULT_RETRY_PERIOD_MS = 2_000;

export class LeaderElector {
  readonly #cfg: LeaderElectionConfig;
  readonly #leaseDurationMs: number;
  readonly #renewDeadlineMs: number;
  readonly #retryPeriodMs: number;
  readonly #clock: Clock;
  readonly #random: () => number;
  readonly #wallTime: () => number;
  readonly #log: (msg: string, fields?: object) => void;

  #observedRecord: LeaderElectionRecord | undefined;
  #observedRaw: string | undefined;
  #observedTime = 0;
  /**
   * Local time at which the last write of this replica's record that succeeded was
   * sent (acquire or renewal); undefined before the first. The server applied it no
   * earlier, and no candidate saw it earlier.
   */
  #renewalSentAt: number | undefined;
  #reportedLeader: string | undefined;

  readonly #cancel = new AbortController();
  #running: Promise<void> | undefined;
  /** While leading: aborted when leadership ends, for any reason. */
  #leading: AbortController | undefined;
  /** Aborted when a confirmation read the Lease held by another replica (or by none). */
  readonly #lost = new AbortController();

  constructor(cfg: LeaderElectionConfig) {
    this.#cfg = cfg;
    this.#leaseDurationMs = cfg.leaseDurationMs ?? DEFAULT_LEASE_DURATION_MS;
    this.#renewDeadlineMs = cfg.renewDeadlineMs ?? DEFAULT_RENEW_DEADLINE_MS;
    this.#retryPeriodMs = cfg.retryPeriodMs ?? DEFAULT_RETRY_PERIOD_MS;
    this.#clock = cfg.clock ?? realClock;
    this.#random = cfg.random ?? Math.random;
    this.#wallTime = cfg.wallTime ?? Date.now;
    this.#log = cfg.log ?? (() => {});
    if (!cfg.identity) throw new Error('leader election: identity must not be empty');
    if (this.#retryPeriodMs <= 0) throw new Error('leader election: retryPeriod must be > 0');
    if (this.#leaseDurationMs <= this.#renewDeadlineMs) {
      throw new Error('leader election: leaseDuration must be greater than renewDeadline');
    }
    if (this.#renewDeadlineMs <= JITTER_FACTOR * this.#retryPeriodMs) {
      throw new Error('leader election: renewDeadline must be greater than 1.2 × retryPeriod');
    }
  }

  /** Whether this replica holds the lease according to the last observed record. */
  isLeader(): boolean {
    return this.#observedRecord?.holderIdentity === this.#cfg.identity;
  }

  /** The holder of the last observed record ('' when released). */
  getLeader(): string | undefined {
    return this.#observedRecord?.holderIdentity;
  }

  /**
   * Whether this replica still holds the Lease, read from the API server now (see
   * `Leadership.confirm`). Rejects with LeadershipLostError when it does not lead any
   * more, or when the read shows another holder (or none): leadership then ends at
   * once (onStoppedLeading runs), without waiting for the next renewal round. Rejects
   * with LeaseExpiredError when the Lease names this replica but is past its lease
   * duration (#expiry): leadership goes on. Any other rejection (the read failed, or
   * took longer than RenewDeadline) means it cannot tell.
   */
  async confirmLeadership(): Promise<void> {
    const leading = this.#leading;
    if (!leading || leading.signal.aborted) {
      throw new LeadershipLostError(`${this.#cfg.identity} does not lead`);
    }
    const deadline = new AbortController();
    const cancel = this.#clock.setTimer(
      () => deadline.abort(new Error('leadership check timed out')),
      this.#renewDeadlineMs,
    );
    let record: LeaderElectionRecord | undefined;
    try {
      record = await this.#cfg.lock.read(AbortSignal.any([leading.signal, deadline.signal]));
    } catch (err) {
      if (leading.signal.aborted) {
        throw new LeadershipLostError(`${this.#cfg.identity} stopped leading`);
      }
      throw err;
    } finally {
      cancel();
    }
    if (leading.signal.aborted) {
      throw new LeadershipLostError(`${this.#cfg.identity} stopped leading`);
    }
    const holder = record?.holderIdentity ?? '';
    if (record && holder === this.#cfg.identity) {
      const expired = this.#expiry(record);
      if (expired) throw new LeaseExpiredError(expired);
      return;
    }
    // Taken over (or released, or deleted): stop believing the Lease is ours, so no
    // renewal writes over the new holder's record, and stop leading now.
    if (record) this.#setObserved(record);
    this.#lost.abort();
    throw new LeadershipLostError(
      holder ? `the Lease is held by ${holder}` : 'the Lease is held by nobody',
    );
  }

  /**
   * Campaign until leading, lead until the lease is lost or `stop()` is called.
   * Resolves when that happens; call it once.
   */
  run(): Promise<void> {
    this.#running ??= this.#run();
    return this.#running;
  }

  /** Stop campaigning or leading; releases the lease if configured. Resolves when run() has returned. */
  async stop(): Promise<void> {
    this.#cancel.abort();
    await this.#running;
  }

  async #run(): Promise<void> {
    const acquired = await this.#acquire();
    if (!acquired) return;
    const leading = new AbortController();
    this.#leading = leading;
    this.#cfg.onLeaderStatus?.(true);
    this.#log('became leader', { lock: this.#cfg.lock.describe(), identity: this.#cfg.identity });
    void Promise.resolve()
      .then(() => this.#cfg.onStartedLeading(leading.signal))
      .catch((err: unknown) =>
        this.#log('onStartedLeading failed', { error: err instanceof Error ? err.message : err }),
      );
    try {
      await this.#renew();
    } finally {
      leading.abort(new Error('leadership lost'));
      this.#cfg.onLeaderStatus?.(false);
      if (this.#cancel.signal.aborted && this.#cfg.releaseOnCancel !== false) {
        await this.#release();
      }
      this.#log('stopped leading', {
        lock: this.#cfg.lock.describe(),
        identity: this.#cfg.identity,
      });
      this.#cfg.onStoppedLeading?.();
    }
  }

  /** Retry every RetryPeriod (with jitter) until the lease is ours; false when cancelled. */
  async #acquire(): Promise<boolean> {
    this.#log('attempting to acquire leader lease', { lock: this.#cfg.lock.describe() });
    while (!this.#cancel.signal.aborted) {
      if ((await this.#tryAcquireOrRenew(this.#cancel.signal)) === 'ours') return true;
      const jitter = this.#random() * JITTER_FACTOR * this.#retryPeriodMs;
      await this.#sleep(this.#retryPeriodMs + jitter, this.#cancel.signal);
    }
    return false;
  }

  /**
   * Renewal rounds, one every RetryPeriod. A round retries every RetryPeriod until it
   * succeeds; if RenewDeadline passes first (requests still in flight are aborted), or
   * it reads the Lease validly held by another replica, or `confirmLeadership` read it
   * held by another, leadership is lost. Returns when lost or cancelled.
   */
  async #renew(): Promise<void> {
    const ending = AbortSignal.any([this.#cancel.signal, this.#lost.signal]);
    while (!ending.aborted) {
      const deadline = new AbortController();
      const cancelDeadline = this.#clock.setTimer(
        () => deadline.abort(new Error('renew deadline exceeded')),
        this.#renewDeadlineMs,
      );
      const round = AbortSignal.any([deadline.signal, ending]);
      let result: Attempt = 'failed';
      try {
        while (!round.aborted) {
          result = await this.#tryAcquireOrRenew(round);
          // Ours again, or another replica's for at least a LeaseDuration: no retry
          // can win it back before RenewDeadline.
          if (result !== 'failed') break;
          await this.#sleep(this.#retryPeriodMs, round);
        }
      } finally {
        cancelDeadline();
      }
      if (this.#cancel.signal.aborted) return;
      if (this.#lost.signal.aborted) break;
      if (result === 'taken') {
        this.#log('lease held by another replica', {
          lock: this.#cfg.lock.describe(),
          holder: this.getLeader(),
        });
        return;
      }
      if (result !== 'ours') {
        this.#log('failed to renew lease', { lock: this.#cfg.lock.describe() });
        return;
      }
      await this.#sleep(this.#retryPeriodMs, ending);
    }
    if (this.#lost.signal.aborted && !this.#cancel.signal.aborted) {
      this.#log('lease held by another replica (read while confirming leadership)', {
        lock: this.#cfg.lock.describe(),
        holder: this.getLeader(),
      });
    }
  }

  /**
   * One attempt: 'ours' when the Lease is (still) ours, 'taken' when it was read held by
   * another replica whose lease is valid (its record changed within a LeaseDuration on
   * the local clock), 'failed' otherwise (an error, a conflict, an abort).
   */
  async #tryAcquireOrRenew(signal: AbortSignal): Promise<Attempt> {
    const nowMs = this.#wallTime();
    const record: LeaderElectionRecord = {
      holderIdentity: this.#cfg.identity,
      leaseDurationSeconds: Math.ceil(this.#leaseDurationMs / 1000),
      acquireTime: microTime(nowMs),
      renewTime: microTime(nowMs),
      leaderTransitions: 0,
    };
    const lock = this.#cfg.lock;
    try {
      // 1. Fast path: we lead and our lease is still valid: renew straight away.
      if (this.isLeader() && this.#isLeaseValid() && this.#observedRecord) {
        const renewed = {
          ...record,
          acquireTime: this.#observedRecord.acquireTime,
          leaderTransitions: this.#observedRecord.leaderTransitions,
        };
        try {
          const sentAt = this.#clock.now();
          await lock.update(renewed, signal);
          this.#setObserved(renewed);
          this.#renewalSentAt = sentAt;
          return 'ours';
        } catch (err) {
          this.#log('fast-path renew failed, falling back to a read', { error: describe(err) });
        }
      }
      if (signal.aborted) return 'failed';

      // 2. Read (or create) the record.
      const current = await lock.get(signal);
      if (!current) {
        const sentAt = this.#clock.now();
        await lock.create(record, signal);
        this.#setObserved(record);
        this.#renewalSentAt = sentAt;
        return 'ours';
      }

      // 3. Someone else holds it and the record changed recently: wait.
      if (current.raw !== this.#observedRaw) {
        this.#setObserved(current.record, current.raw);
      }
      if (current.record.holderIdentity !== '' && this.#isLeaseValid() && !this.isLeader()) {
        return 'taken';
      }

      // 4. Take it over (or renew it), conditional on the version just read.
      if (this.isLeader()) {
        record.acquireTime = current.record.acquireTime;
        record.leaderTransitions = current.record.leaderTransitions;
      } else {
        record.leaderTransitions = current.record.leaderTransitions + 1;
      }
      const sentAt = this.#clock.now();
      await lock.update(record, signal);
      this.#setObserved(record);
      this.#renewalSentAt = sentAt;
      return 'ours';
    } catch (err) {
      if (!signal.aborted) {
        const level = err instanceof KubeApiError && err.code === 409 ? 'conflict' : 'error';
        this.#log(`lease ${level}`, { lock: lock.describe(), error: describe(err) });
      }
      return 'failed';
    }
  }

  /**
   * Why `record`, which names this replica, may be taken by another replica at any
   * moment, or undefined while it may not: its lease duration (the record's, or the
   * configured one if shorter) has passed since this replica's last successful renewal
   * was sent (local monotonic clock), or since the record's renewTime (this replica's
   * wall clock, which wrote it). A renewTime ahead of the wall clock (the clock stepped
   * back) leaves the monotonic measure alone to decide.
   */
  #expiry(record: LeaderElectionRecord): string | undefined {
    const durationMs = Math.min(record.leaseDurationSeconds * 1000, this.#leaseDurationMs);
    const lease = `lease duration ${durationMs} ms`;
    if (this.#renewalSentAt === undefined) return `no renewal of the Lease succeeded (${lease})`;
    const sinceRenewal = this.#clock.now() - this.#renewalSentAt;
    if (sinceRenewal >= durationMs) {
      return `the last renewal of the Lease that succeeded was sent ${Math.round(sinceRenewal)} ms ago (${lease})`;
    }
    const renewedAt = Date.parse(record.renewTime);
    if (Number.isNaN(renewedAt)) return `the Lease has no renewTime (${lease})`;
    const age = this.#wallTime() - renewedAt;
    if (age >= durationMs) {
      return `the Lease's renewTime ${record.renewTime} is ${Math.round(age)} ms old (${lease})`;
    }
    return undefined;
  }

  /** Whether the observed record is younger than its lease duration (local clock). */
  #isLeaseValid(): boolean {
    const duration = (this.#observedRecord?.leaseDurationSeconds ?? 0) * 1000;
    return this.#observedTime + duration > this.#clock.now();
  }

  #setObserved(record: LeaderElectionRecord, raw = JSON.stringify(record)): void {
    this.#observedRecord = record;
    this.#observedRaw = raw;
    this.#observedTime = this.#clock.now();
    if (record.holderIdentity !== this.#reportedLeader) {
      this.#reportedLeader = record.holderIdentity;
      if (record.holderIdentity) this.#cfg.onNewLeader?.(record.holderIdentity);
    }
  }

  async #release(): Promise<void> {
    if (!this.isLeader() || !this.#observedRecord) return;
    const nowMs = this.#wallTime();
    const released: LeaderElectionRecord = {
      holderIdentity: '',
      leaseDurationSeconds: 1,
      acquireTime: microTime(nowMs),
      renewTime: microTime(nowMs),
      leaderTransitions: this.#observedRecord.leaderTransitions,
    };
    const timeout = new AbortController();
    const cancel = this.#clock.setTimer(
      () => timeout.abort(new Error('release timed out')),
      this.#renewDeadlineMs,
    );
    try {
      // Re-read first (as client-go's release does): a renew aborted by the
      // cancellation may have been applied by the server, and an update against the
      // version read before it would fail with a conflict and leave the Lease held.
      const current = await this.#cfg.lock.get(timeout.signal);
      if (current?.record.holderIdentity !== this.#cfg.identity) return;
      released.leaderTransitions = current.record.leaderTransitions;
      await this.#cfg.lock.update(released, timeout.signal);
      this.#setObserved(released);
      this.#log('released leader lease', { lock: this.#cfg.lock.describe() });
    } catch (err) {
      this.#log('failed to release lease', { error: describe(err) });
    } finally {
      cancel();
    }
  }

  #sleep(ms: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal.aborted) return resolve();
      const onAbort = (): void => {
        cancel();
        resolve();
      };
      const cancel = this.#clock.setTimer(() => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
