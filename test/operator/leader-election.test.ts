// Leader election (O9) on an in-memory lock with resourceVersion semantics and a
// FakeClock. The same properties run against the in-memory API server in
// leader-election-apiserver.test.ts.
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../operator/controller/clock.ts';
import { KubeApiError } from '../../operator/controller/kube-client.ts';
import {
  LeaderElector,
  LeaseExpiredError,
  LeadershipLostError,
  microTime,
  type LeaderElectionConfig,
  type LeaderElectionRecord,
  type ResourceLock,
} from '../../operator/controller/leader-election.ts';

const flush = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
};

/** The "API server": one record with a resourceVersion. */
class LeaseStore {
  record: LeaderElectionRecord | undefined;
  rv = 0;
  writes: { by: string; record: LeaderElectionRecord }[] = [];
  /** What happened, in order: `<who> read <holder>`, and what tests add. */
  log: string[] = [];
}

/** One replica's view of the store; can be frozen (calls hang until aborted) or failing. */
class FakeLock implements ResourceLock {
  readonly store: LeaseStore;
  readonly who: string;
  frozen = false;
  failing = false;
  /** Creates and updates fail, reads go through (a partition that lets GETs by). */
  failingWrites = false;
  #seenRv = -1;

  constructor(store: LeaseStore, who: string) {
    this.store = store;
    this.who = who;
  }

  async #gate(signal: AbortSignal): Promise<void> {
    await Promise.resolve();
    if (this.frozen) {
      await new Promise<void>((_, reject) => {
        if (signal.aborted) reject(new Error('aborted'));
        signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
      });
    }
    if (this.failing) throw new KubeApiError(500, 'internal error');
  }

  async get(signal: AbortSignal) {
    await this.#gate(signal);
    if (!this.store.record) return undefined;
    this.#seenRv = this.store.rv;
    this.store.log.push(`${this.who} read ${this.store.record.holderIdentity}`);
    return { record: { ...this.store.record }, raw: JSON.stringify(this.store.record) };
  }

  async read(signal: AbortSignal) {
    await this.#gate(signal);
    this.store.log.push(`${this.who} checked ${this.store.record?.holderIdentity ?? '(none)'}`);
    return this.store.record && { ...this.store.record };
  }

  async create(record: LeaderElectionRecord, signal: AbortSignal) {
    await this.#gate(signal);
    if (this.failingWrites) throw new KubeApiError(503, 'unavailable');
    if (this.store.record) throw new KubeApiError(409, 'already exists', 'AlreadyExists');
    this.#write(record);
  }

  async update(record: LeaderElectionRecord, signal: AbortSignal) {
    await this.#gate(signal);
    if (this.failingWrites) throw new KubeApiError(503, 'unavailable');
    if (this.#seenRv !== this.store.rv) throw new KubeApiError(409, 'conflict', 'Conflict');
    this.#write(record);
  }

  #write(record: LeaderElectionRecord): void {
    this.store.record = { ...record };
    this.store.rv++;
    this.#seenRv = this.store.rv;
    this.store.writes.push({ by: this.who, record: { ...record } });
  }

  describe(): string {
    return 'test/lease';
  }
}

interface Candidate {
  id: string;
  lock: FakeLock;
  elector: LeaderElector;
  startedAt: number[];
  stoppedAt: number[];
  signals: AbortSignal[];
  done: Promise<void>;
}

const LEASE = 15_000;
const RENEW = 10_000;
const RETRY = 2_000;

function candidate(
  store: LeaseStore,
  clock: FakeClock,
  id: string,
  extra: Partial<LeaderElectionConfig> = {},
): Candidate {
  const lock = new FakeLock(store, id);
  const c: Omit<Candidate, 'elector' | 'done'> = {
    id,
    lock,
    startedAt: [],
    stoppedAt: [],
    signals: [],
  };
  const elector = new LeaderElector({
    lock,
    identity: id,
    clock,
    wallTime: () => 1_700_000_000_000 + clock.now(),
    random: () => 0,
    onStartedLeading: (signal) => {
      c.startedAt.push(clock.now());
      c.signals.push(signal);
    },
    onStoppedLeading: () => c.stoppedAt.push(clock.now()),
    ...extra,
  });
  const full = { ...c, elector, done: elector.run() };
  return full;
}

async function advance(clock: FakeClock, ms: number, step = 100): Promise<void> {
  for (let t = 0; t < ms; t += step) {
    clock.step(step);
    await flush();
  }
}

describe('LeaderElector', () => {
  it('validates LeaseDuration > RenewDeadline > 1.2 × RetryPeriod', () => {
    const base = {
      lock: new FakeLock(new LeaseStore(), 'x'),
      identity: 'x',
      onStartedLeading() {},
    };
    expect(
      () => new LeaderElector({ ...base, leaseDurationMs: 10_000, renewDeadlineMs: 10_000 }),
    ).toThrow(/leaseDuration/);
    expect(
      () => new LeaderElector({ ...base, renewDeadlineMs: 2_400, retryPeriodMs: 2_000 }),
    ).toThrow(/1.2/);
    expect(() => new LeaderElector({ ...base, identity: '' })).toThrow(/identity/);
    expect(() => new LeaderElector(base)).not.toThrow();
  });

  it('formats MicroTime with six fractional digits', () => {
    expect(microTime(Date.UTC(2026, 0, 2, 3, 4, 5, 678))).toBe('2026-01-02T03:04:05.678000Z');
  });

  it('exactly one of two candidates leads, and keeps renewing', async () => {
    const clock = new FakeClock();
    const store = new LeaseStore();
    const a = candidate(store, clock, 'a');
    const b = candidate(store, clock, 'b');
    await flush();
    await advance(clock, 60_000);
    const leaders = [a, b].filter((c) => c.elector.isLeader());
    expect(leaders).toHaveLength(1);
    const [leader] = leaders;
    const other = leader === a ? b : a;
    expect(store.record?.holderIdentity).toBe(leader?.id);
    expect(leader?.startedAt).toHaveLength(1);
    expect(other.startedAt).toHaveLength(0);
    expect(store.record?.leaderTransitions).toBe(0);
    // Renewed about every RetryPeriod, and only by the leader.
    const renewals = store.writes.filter((w) => w.by === leader?.id).length;
    expect(renewals).toBeGreaterThanOrEqual(25);
    expect(store.writes.every((w) => w.by === leader?.id)).toBe(true);
    expect(other.elector.getLeader()).toBe(leader?.id);
    await a.elector.stop();
    await b.elector.stop();
  });

  it('takes over from a dead leader only after a whole LeaseDuration, within about LeaseDuration + RetryPeriod', async () => {
    const clock = new FakeClock();
    const store = new LeaseStore();
    const a = candidate(store, clock, 'a');
    await flush();
    expect(a.elector.isLeader()).toBe(true);
    const b = candidate(store, clock, 'b');
    await advance(clock, 10_000);
    expect(b.startedAt).toHaveLength(0);
    // Kill a: its calls hang forever (no release), like a SIGKILLed pod.
    a.lock.frozen = true;
    const killedAt = clock.now();
    const lastRenew = store.writes.at(-1);
    await advance(clock, LEASE + 2 * RETRY + 1000, 50);
    expect(b.startedAt).toHaveLength(1);
    const took = (b.startedAt[0] ?? 0) - killedAt;
    expect(took).toBeGreaterThanOrEqual(LEASE - RETRY);
    expect(took).toBeLessThanOrEqual(LEASE + 2 * RETRY);
    expect(store.record?.holderIdentity).toBe('b');
    expect(store.record?.leaderTransitions).toBe(1);
    expect(lastRenew?.by).toBe('a');
    // The dead leader gave up on its own before b took over (RenewDeadline < LeaseDuration).
    expect(a.stoppedAt).toHaveLength(1);
    expect(a.stoppedAt[0]).toBeLessThan(b.startedAt[0] ?? 0);
    expect(a.signals[0]?.aborted).toBe(true);
    await b.elector.stop();
    a.lock.frozen = false;
    await a.elector.stop();
  });

  it('a leader that cannot renew before RenewDeadline stops leading', async () => {
    const clock = new FakeClock();
    const store = new LeaseStore();
    const a = candidate(store, clock, 'a');
    await flush();
    expect(a.elector.isLeader()).toBe(true);
    await advance(clock, 5_000);
    a.lock.failing = true;
    const failedAt = clock.now();
    await advance(clock, RENEW - 2 * RETRY);
    expect(a.stoppedAt).toHaveLength(0);
    await advance(clock, 2 * RETRY + RETRY + 500);
    expect(a.stoppedAt).toHaveLength(1);
    expect((a.stoppedAt[0] ?? 0) - failedAt).toBeLessThanOrEqual(RENEW + RETRY + 200);
    expect(a.signals[0]?.aborted).toBe(true);
    await a.done; // run() returns when leadership is lost
    const writes = store.writes.length;
    a.lock.failing = false;
    await advance(clock, 10_000);
    expect(store.writes.length).toBe(writes);
  });

  it('a leader frozen past LeaseDuration stops at once on resume when another holds the Lease', async () => {
    // One clock per process: a frozen process's clock jumps when it resumes, its
    // timers fire late, and nothing of it runs meanwhile.
    const clockA = new FakeClock();
    const clockB = new FakeClock();
    const both = async (ms: number): Promise<void> => {
      for (let t = 0; t < ms; t += 100) {
        clockA.step(100);
        clockB.step(100);
        await flush();
      }
    };
    const store = new LeaseStore();
    const a = candidate(store, clockA, 'a');
    await flush();
    expect(a.elector.isLeader()).toBe(true);
    // a's leader work: a status write every 500 ms while it leads.
    const signal = a.signals[0];
    const work = (): void => {
      if (signal?.aborted) return;
      store.log.push('a writes status');
      clockA.setTimer(work, 500);
    };
    work();
    const b = candidate(store, clockB, 'b');
    await both(5_000);
    expect(b.startedAt).toHaveLength(0);

    // a freezes; b takes over once a's record has stood still for a LeaseDuration.
    const frozenMs = LEASE + 2 * RETRY;
    await advance(clockB, frozenMs);
    expect(b.startedAt).toHaveLength(1);
    expect(store.record?.holderIdentity).toBe('b');
    expect(a.stoppedAt).toHaveLength(0);

    // a resumes: its clock has moved on by the time it was frozen.
    clockA.step(frozenMs);
    const resumedAt = clockA.now();
    await flush();
    await both(RENEW + RETRY);
    expect(a.stoppedAt).toHaveLength(1);
    expect((a.stoppedAt[0] ?? 0) - resumedAt).toBeLessThanOrEqual(RETRY);
    expect(signal?.aborted).toBe(true);
    await a.done;
    // Nothing written by a once it has read b's Lease.
    const sawB = store.log.indexOf('a read b');
    expect(sawB).toBeGreaterThan(-1);
    expect(store.log.slice(sawB)).not.toContain('a writes status');
    expect(store.writes.slice(-1)[0]?.by).toBe('b');
    expect(store.record?.holderIdentity).toBe('b');
    expect(b.stoppedAt).toHaveLength(0);
    await b.elector.stop();
  });

  it('a frozen API call is cut off at RenewDeadline', async () => {
    const clock = new FakeClock();
    const store = new LeaseStore();
    const a = candidate(store, clock, 'a');
    await flush();
    a.lock.frozen = true;
    const frozenAt = clock.now();
    await advance(clock, RENEW + 3 * RETRY);
    expect(a.stoppedAt).toHaveLength(1);
    expect((a.stoppedAt[0] ?? 0) - frozenAt).toBeLessThanOrEqual(RENEW + RETRY + 200);
    await a.done;
  });

  it('a conflicting write (409) means another replica won', async () => {
    const clock = new FakeClock();
    const store = new LeaseStore();
    const a = candidate(store, clock, 'a');
    await flush();
    // Someone else overwrites the lease with a fresh record behind a's back.
    store.record = {
      holderIdentity: 'intruder',
      leaseDurationSeconds: 15,
      acquireTime: microTime(1),
      renewTime: microTime(1),
      leaderTransitions: 1,
    };
    store.rv++;
    await advance(clock, RENEW + 2 * RETRY);
    expect(a.stoppedAt).toHaveLength(1);
    expect(a.elector.isLeader()).toBe(false);
    expect(store.record?.holderIdentity).toBe('intruder');
    await a.done;
  });

  it('stop() releases the lease (empty holder, 1 s) and the other candidate takes over quickly', async () => {
    const clock = new FakeClock();
    const store = new LeaseStore();
    const a = candidate(store, clock, 'a');
    await flush();
    const b = candidate(store, clock, 'b');
    await advance(clock, 4_000);
    const stopping = a.elector.stop();
    await flush();
    await stopping;
    expect(store.record?.holderIdentity).toBe('');
    expect(store.record?.leaseDurationSeconds).toBe(1);
    expect(a.stoppedAt).toHaveLength(1);
    const releasedAt = clock.now();
    await advance(clock, RETRY * 2.5);
    expect(b.startedAt).toHaveLength(1);
    expect((b.startedAt[0] ?? 0) - releasedAt).toBeLessThanOrEqual(RETRY + 100);
    await b.elector.stop();
  });

  it('stop() releases even when the last renew was applied but never acknowledged', async () => {
    const clock = new FakeClock();
    const store = new LeaseStore();
    const a = candidate(store, clock, 'a');
    await flush();
    await advance(clock, 4_000);
    expect(store.record?.holderIdentity).toBe('a');
    // The server applied a renew whose answer the cancellation cut off: the version
    // moved on without the elector seeing it.
    store.rv++;
    const stopping = a.elector.stop();
    await flush();
    await stopping;
    expect(store.record?.holderIdentity).toBe('');
  });

  it('confirmLeadership reads the Lease: ours → resolves; another holder → LeadershipLostError and leadership ends at once, with no renewal over the new holder', async () => {
    const clock = new FakeClock();
    const store = new LeaseStore();
    const a = candidate(store, clock, 'a');
    await flush();
    await advance(clock, 3_000);
    const writes = store.writes.length;
    await expect(a.elector.confirmLeadership()).resolves.toBeUndefined();
    // A read, not a write: the next renewal is still conditional on a's own version.
    expect(store.writes).toHaveLength(writes);
    expect(store.log.at(-1)).toBe('a checked a');
    // Taken over between two renewals (as after a freeze), before a's next round.
    store.record = {
      holderIdentity: 'b',
      leaseDurationSeconds: 15,
      acquireTime: microTime(1),
      renewTime: microTime(1),
      leaderTransitions: 1,
    };
    store.rv++;
    await expect(a.elector.confirmLeadership()).rejects.toThrow(
      expect.objectContaining({ name: 'LeadershipLostError', message: 'the Lease is held by b' }),
    );
    await flush();
    expect(a.stoppedAt).toEqual([clock.now()]);
    expect(a.signals[0]?.aborted).toBe(true);
    expect(a.elector.isLeader()).toBe(false);
    await a.done;
    await advance(clock, 10_000);
    expect(store.writes).toHaveLength(writes);
    expect(store.record.holderIdentity).toBe('b');
    // Asked again once it no longer leads: lost, without a read.
    const reads = store.log.length;
    await expect(a.elector.confirmLeadership()).rejects.toBeInstanceOf(LeadershipLostError);
    expect(store.log).toHaveLength(reads);
  });

  it('confirmLeadership that cannot read the Lease says so (not lost): the leader goes on', async () => {
    const clock = new FakeClock();
    const store = new LeaseStore();
    const a = candidate(store, clock, 'a');
    await flush();
    a.lock.failing = true;
    const failed = await a.elector.confirmLeadership().catch((err: unknown) => err);
    expect(failed).toBeInstanceOf(KubeApiError);
    expect(failed).not.toBeInstanceOf(LeadershipLostError);
    expect(a.stoppedAt).toHaveLength(0);
    a.lock.failing = false;
    await expect(a.elector.confirmLeadership()).resolves.toBeUndefined();
    // A follower never leads: lost at once.
    const b = candidate(store, clock, 'b');
    await advance(clock, 3_000);
    await expect(b.elector.confirmLeadership()).rejects.toBeInstanceOf(LeadershipLostError);
    expect(a.stoppedAt).toHaveLength(0);
    await b.elector.stop();
    await a.elector.stop();
  });

  it('confirmLeadership does not confirm a Lease that names this replica but is past its duration (renewals failing, a late timer); leadership goes on and confirms again once a renewal gets through', async () => {
    const clock = new FakeClock();
    const store = new LeaseStore();
    const a = candidate(store, clock, 'a');
    await flush();
    await advance(clock, 3_000);
    await expect(a.elector.confirmLeadership()).resolves.toBeUndefined();
    // Renewals fail from now on, reads go through; then the process stalls past the
    // lease duration (one step: every timer due meanwhile fires late, at once).
    a.lock.failingWrites = true;
    clock.step(LEASE + RETRY);
    await flush();
    expect(store.record?.holderIdentity).toBe('a');
    const refused = await a.elector.confirmLeadership().catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(LeaseExpiredError);
    expect(refused).not.toBeInstanceOf(LeadershipLostError);
    expect((refused as Error).message).toMatch(
      /last renewal of the Lease that succeeded was sent \d+ ms ago \(lease duration 15000 ms\)/,
    );
    expect(store.log.at(-1)).toBe('a checked a');
    // Not lost: the renewal rounds decide, and one that gets through makes it valid again.
    expect(a.stoppedAt).toHaveLength(0);
    a.lock.failingWrites = false;
    await advance(clock, 2 * RETRY);
    expect(a.stoppedAt).toHaveLength(0);
    await expect(a.elector.confirmLeadership()).resolves.toBeUndefined();
    // Renewals that keep failing end it at RenewDeadline, as before.
    a.lock.failingWrites = true;
    await advance(clock, RENEW + 2 * RETRY);
    expect(a.stoppedAt).toHaveLength(1);
    await expect(a.elector.confirmLeadership()).rejects.toBeInstanceOf(LeadershipLostError);
    await a.done;
  });

  it('confirmLeadership measures from when the last successful renewal was sent, not from its answer', async () => {
    const clock = new FakeClock();
    const store = new LeaseStore();
    const a = candidate(store, clock, 'a');
    await flush();
    // The next renewal is applied at once but answered 4 s later: the server (and any
    // candidate watching) saw it when it was sent.
    let slowNext = false;
    const update = a.lock.update.bind(a.lock);
    a.lock.update = async (record, signal) => {
      await update(record, signal);
      if (!slowNext) return;
      slowNext = false;
      await new Promise<void>((r) => clock.setTimer(r, 4_000));
    };
    slowNext = true;
    const writes = store.writes.length;
    await advance(clock, RETRY + 100);
    expect(store.writes).toHaveLength(writes + 1);
    const sentAt = clock.now() - 100;
    await advance(clock, 4_000);
    expect(slowNext).toBe(false);
    // Every renewal after the slow one fails; the round that started after its answer
    // gives up only at answer + RetryPeriod + RenewDeadline, after the lease duration.
    a.lock.failingWrites = true;
    await advance(clock, sentAt + LEASE - 300 - clock.now());
    await expect(a.elector.confirmLeadership()).resolves.toBeUndefined();
    await advance(clock, 400);
    expect(a.stoppedAt).toHaveLength(0);
    // Counted from the send, the lease duration has passed; from the answer, it has not.
    await expect(a.elector.confirmLeadership()).rejects.toBeInstanceOf(LeaseExpiredError);
    a.lock.failingWrites = false;
    await a.elector.stop();
  });

  it("confirmLeadership does not confirm a Lease whose renewTime is older than its duration on this replica's wall clock", async () => {
    const clock = new FakeClock();
    const store = new LeaseStore();
    let wallShift = 0;
    const a = candidate(store, clock, 'a', {
      wallTime: () => 1_700_000_000_000 + clock.now() + wallShift,
    });
    await flush();
    await advance(clock, 3_000);
    a.lock.failingWrites = true;
    await expect(a.elector.confirmLeadership()).resolves.toBeUndefined();
    // The record's renewTime, read back, is a lease duration behind this replica's wall clock.
    wallShift = LEASE;
    await expect(a.elector.confirmLeadership()).rejects.toThrow(
      expect.objectContaining({
        name: 'LeaseExpiredError',
        message: expect.stringMatching(/renewTime .* is \d+ ms old/) as string,
      }),
    );
    expect(a.stoppedAt).toHaveLength(0);
    // A renewal that gets through writes a renewTime of now: confirmed again.
    a.lock.failingWrites = false;
    await advance(clock, 2 * RETRY);
    await expect(a.elector.confirmLeadership()).resolves.toBeUndefined();
    await a.elector.stop();
  });

  it('stop() before leading does not call onStoppedLeading', async () => {
    const clock = new FakeClock();
    const store = new LeaseStore();
    const a = candidate(store, clock, 'a');
    await flush();
    const b = candidate(store, clock, 'b');
    await advance(clock, 3_000);
    await b.elector.stop();
    expect(b.startedAt).toHaveLength(0);
    expect(b.stoppedAt).toHaveLength(0);
    expect(store.record?.holderIdentity).toBe('a');
    await a.elector.stop();
  });
});
