// Leader election (O9) on a real coordination.k8s.io/v1 Lease served by the in-memory
// API server, with short durations: LeaseDuration 2 s > RenewDeadline 1 s > 1.2 ×
// RetryPeriod (200 ms). Assertions are on the Lease and on the callbacks.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FakeClock, type Clock } from '../../operator/controller/clock.ts';
import type { KubeClient } from '../../operator/controller/kube-client.ts';
import {
  LeaderElector,
  LeaseExpiredError,
  LeaseLock,
} from '../../operator/controller/leader-election.ts';
import type { KubeApiServer } from '../../testing/kube-apiserver/index.ts';
import { startTestCluster, type TestCluster } from '../support/test-cluster.ts';
import { eventually, sleep } from '../support/eventually.ts';

const LEASE_MS = 4000;
const RENEW_MS = 2000;
const RETRY_MS = 200;

let cluster: TestCluster;
let server: KubeApiServer;
let client: KubeClient;
let leaseCounter = 0;
const electors: LeaderElector[] = [];

beforeAll(async () => {
  cluster = await startTestCluster();
  ({ server, client } = cluster);
});

afterEach(async () => {
  server.faults.clear();
  await Promise.all(electors.splice(0).map((e) => e.stop()));
});

afterAll(() => cluster.close());

interface LeaseObj {
  spec: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    leaseTransitions?: number;
    renewTime?: string;
  };
}

function candidate(leaseName: string, id: string, releaseOnCancel = true, clock?: Clock) {
  const c = {
    id,
    started: [] as number[],
    stopped: [] as number[],
    signal: undefined as AbortSignal | undefined,
    elector: undefined as unknown as LeaderElector,
  };
  c.elector = new LeaderElector({
    lock: new LeaseLock(client, 'default', leaseName),
    identity: id,
    leaseDurationMs: LEASE_MS,
    renewDeadlineMs: RENEW_MS,
    retryPeriodMs: RETRY_MS,
    releaseOnCancel,
    ...(clock ? { clock } : {}),
    onStartedLeading: (signal) => {
      c.started.push(Date.now());
      c.signal = signal;
    },
    onStoppedLeading: () => c.stopped.push(Date.now()),
  });
  electors.push(c.elector);
  void c.elector.run();
  return c;
}

const getLease = (name: string) =>
  client.request<LeaseObj>('GET', `/apis/coordination.k8s.io/v1/namespaces/default/leases/${name}`);

describe('LeaderElector on a Lease (in-memory API server)', () => {
  it('exactly one of two candidates leads', async () => {
    const lease = `le${++leaseCounter}`;
    const a = candidate(lease, 'a');
    const b = candidate(lease, 'b');
    await eventually(() => expect(a.started.length + b.started.length).toBe(1));
    await sleep(LEASE_MS + 500);
    const leaders = [a, b].filter((c) => c.elector.isLeader());
    expect(leaders).toHaveLength(1);
    expect(a.started.length + b.started.length).toBe(1);
    const l = await getLease(lease);
    expect(l.spec.holderIdentity).toBe(leaders[0]?.id);
    expect(l.spec.leaseDurationSeconds).toBe(LEASE_MS / 1000);
    expect(l.spec.renewTime).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
  });

  it('a killed leader (no release) is replaced after about LeaseDuration + RetryPeriod', async () => {
    const lease = `le${++leaseCounter}`;
    const a = candidate(lease, 'a', false);
    await eventually(() => expect(a.started).toHaveLength(1));
    const b = candidate(lease, 'b');
    await sleep(600);
    expect(b.started).toHaveLength(0);
    await a.elector.stop(); // stops renewing; releaseOnCancel=false leaves the Lease as a crash would
    const killedAt = Date.now();
    expect((await getLease(lease)).spec.holderIdentity).toBe('a');
    await eventually(() => expect(b.started).toHaveLength(1), LEASE_MS * 3);
    const took = (b.started[0] ?? 0) - killedAt;
    expect(took).toBeGreaterThanOrEqual(LEASE_MS - RETRY_MS - 50);
    // Slack for a loaded 2-core machine; the bound is still well under 2 × LeaseDuration.
    expect(took).toBeLessThanOrEqual(LEASE_MS + RETRY_MS * (1 + 1.2) + 1000);
    const l = await getLease(lease);
    expect(l.spec.holderIdentity).toBe('b');
    expect(l.spec.leaseTransitions).toBe(1);
  });

  it('a released lease is taken over within a RetryPeriod or two', async () => {
    const lease = `le${++leaseCounter}`;
    const a = candidate(lease, 'a');
    await eventually(() => expect(a.started).toHaveLength(1));
    const b = candidate(lease, 'b');
    await sleep(300);
    await a.elector.stop();
    const releasedAt = Date.now();
    await eventually(() => expect(b.started).toHaveLength(1));
    expect((b.started[0] ?? 0) - releasedAt).toBeLessThanOrEqual(RETRY_MS * 2.2 * 2 + 1000);
    expect(a.stopped).toHaveLength(1);
  });

  it('a leader that cannot renew before RenewDeadline stops leading, before anyone takes over', async () => {
    const lease = `le${++leaseCounter}`;
    const a = candidate(lease, 'a');
    await eventually(() => expect(a.started).toHaveLength(1));
    // Every Lease call now hangs for 3 s: the leader is cut off from the API server.
    const frozenAt = Date.now();
    server.faults.delayNext(1000, 3000, (r) => r.path.includes('/leases'));
    await eventually(() => expect(a.stopped).toHaveLength(1), RENEW_MS * 3);
    expect((a.stopped[0] ?? 0) - frozenAt).toBeLessThanOrEqual(RENEW_MS + RETRY_MS + 1000);
    expect((a.stopped[0] ?? 0) - frozenAt).toBeLessThan(LEASE_MS);
    expect(a.signal?.aborted).toBe(true);
    expect(a.elector.isLeader()).toBe(true); // its last view; it no longer acts on it
    server.faults.clear();
    // It does not come back by itself: run() has returned.
    const b = candidate(lease, 'b');
    await eventually(() => expect(b.started).toHaveLength(1), LEASE_MS * 4);
    expect(a.started).toHaveLength(1);
  });

  it('a leader frozen past LeaseDuration stops on resume as soon as it reads the new holder', async () => {
    const lease = `le${++leaseCounter}`;
    // a's timers run on a clock the test steps: a is frozen while it is not stepped.
    const clockA = new FakeClock();
    const a = candidate(lease, 'a', true, clockA);
    await eventually(() => expect(a.started).toHaveLength(1));
    const b = candidate(lease, 'b');
    await eventually(() => expect(b.started).toHaveLength(1), LEASE_MS * 3);
    expect(a.stopped).toHaveLength(0);
    // a resumes: its clock jumps past the LeaseDuration, then keeps pace with the wall.
    clockA.step(LEASE_MS + RETRY_MS);
    const resumedAt = Date.now();
    const ticking = setInterval(() => clockA.step(20), 20);
    try {
      await eventually(() => expect(a.stopped).toHaveLength(1), RENEW_MS * 3);
    } finally {
      clearInterval(ticking);
    }
    // Not after RenewDeadline (2 s) of retries: on the first read of b's Lease.
    expect((a.stopped[0] ?? 0) - resumedAt).toBeLessThan(RETRY_MS + 500);
    expect(a.signal?.aborted).toBe(true);
    expect(a.elector.getLeader()).toBe('b');
    expect((await getLease(lease)).spec.holderIdentity).toBe('b');
    expect(b.stopped).toHaveLength(0);
  });
  it('a leader whose renewals fail does not confirm once its Lease is past the lease duration, though the Lease still names it', async () => {
    const lease = `le${++leaseCounter}`;
    // a's timers run on a clock the test steps: a stalls while it is not stepped.
    const clockA = new FakeClock();
    const a = candidate(lease, 'a', true, clockA);
    await eventually(() => expect(a.started).toHaveLength(1));
    await expect(a.elector.confirmLeadership()).resolves.toBeUndefined();
    // Writes of the Lease fail from now on (the partition lets reads by), and a stalls
    // past the lease duration: its clock jumps, its timers fire late.
    server.faults.failNext(
      1_000_000,
      500,
      (r) => r.method === 'PUT' && r.path.endsWith(`/leases/${lease}`),
    );
    clockA.step(LEASE_MS + RETRY_MS);
    const refused = await a.elector.confirmLeadership().catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(LeaseExpiredError);
    expect((await getLease(lease)).spec.holderIdentity).toBe('a');
    // Not lost: a renewal that gets through makes the Lease confirm again.
    expect(a.stopped).toHaveLength(0);
    server.faults.clear();
    const ticking = setInterval(() => clockA.step(20), 20);
    try {
      await eventually(() => expect(a.elector.confirmLeadership()).resolves.toBeUndefined());
    } finally {
      clearInterval(ticking);
    }
    expect(a.stopped).toHaveLength(0);
    expect((await getLease(lease)).spec.holderIdentity).toBe('a');
  });
});
