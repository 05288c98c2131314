// The operator lifecycle (O9, O10) on a real Lease in the in-memory API server:
// leader-only work starts on the leader only; SIGTERM drains before releasing the
// Lease; losing the Lease exits without draining.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../operator/controller/kube-client.ts';
import { DEFAULT_SHUTDOWN_DRAIN_MS, Manager } from '../../operator/controller/manager.ts';
import { FakeClock } from '../../operator/controller/clock.ts';
import { SHUTDOWN_GRACE_MS } from '../../roles/lifecycle.ts';
import type { KubeApiServer } from '../../testing/kube-apiserver/index.ts';
import { startTestCluster, type TestCluster } from '../support/test-cluster.ts';
import { eventually, sleep } from '../support/eventually.ts';

let cluster: TestCluster;
let server: KubeApiServer;
let client: KubeClient;
let leaseCounter = 0;

beforeAll(async () => {
  cluster = await startTestCluster();
  ({ server, client } = cluster);
});

afterAll(() => cluster.close());

const holder = async (lease: string) =>
  (
    await client.request<{ spec: { holderIdentity?: string } }>(
      'GET',
      `/apis/coordination.k8s.io/v1/namespaces/default/leases/${lease}`,
    )
  ).spec.holderIdentity;

function replica(lease: string, id: string) {
  const r = {
    id,
    started: 0,
    stops: [] as (number | undefined)[],
    holderAtStop: [] as (string | undefined)[],
    lost: 0,
    manager: undefined as unknown as Manager,
  };
  r.manager = new Manager({
    leaderElection: {
      lock: { client, namespace: 'default', name: lease },
      identity: id,
      // Wide enough that a test worker busy with other suites does not lose the
      // Lease by starvation; a release is still taken on the next 200 ms retry.
      leaseDurationMs: 6000,
      renewDeadlineMs: 4000,
      retryPeriodMs: 200,
    },
    // The drain budget on a clock that stands still: a busy CI machine must not
    // shave a millisecond off the 20 s the stop is given.
    clock: new FakeClock(),
    startLeading: async () => {
      r.started++;
      await Promise.resolve();
      return {
        stop: async (ms?: number) => {
          r.stops.push(ms);
          r.holderAtStop.push(await holder(lease));
        },
      };
    },
    onLostLeadership: () => r.lost++,
  });
  r.manager.start();
  return r;
}

describe('Manager', () => {
  it('without leader election starts the work at once and drains it on shutdown', async () => {
    const stops: (number | undefined)[] = [];
    let started = 0;
    const m = new Manager({
      clock: new FakeClock(),
      startLeading: () => {
        started++;
        return Promise.resolve({ stop: (ms?: number) => (stops.push(ms), Promise.resolve()) });
      },
    });
    m.start();
    await eventually(() => expect(started).toBe(1));
    await m.shutdown();
    await m.shutdown();
    expect(stops).toEqual([20_000]);
    expect(m.identity).toBeUndefined();
  });

  it('time spent waiting for the work to start comes out of the drain budget', async () => {
    const clock = new FakeClock();
    const stops: (number | undefined)[] = [];
    let started!: (s: { stop: (ms?: number) => Promise<void> }) => void;
    const m = new Manager({
      clock,
      startLeading: () => new Promise((resolve) => (started = resolve)),
    });
    m.start();
    const stopping = m.shutdown();
    clock.step(5_000);
    started({ stop: (ms?: number) => (stops.push(ms), Promise.resolve()) });
    await stopping;
    expect(stops).toEqual([15_000]);
  });

  it('drains within 20 s by default, inside the process’s 25 s forced exit', () => {
    expect(DEFAULT_SHUTDOWN_DRAIN_MS).toBeLessThan(SHUTDOWN_GRACE_MS);
  });

  it('work still starting at shutdown is not waited for past the budget: the Lease is released', async () => {
    const lease = `mgr${++leaseCounter}`;
    const m = new Manager({
      leaderElection: {
        lock: { client, namespace: 'default', name: lease },
        identity: 'slow',
        leaseDurationMs: 6000,
        renewDeadlineMs: 4000,
        retryPeriodMs: 200,
      },
      // An initial sync that never ends.
      startLeading: () => new Promise(() => {}),
      drainTimeoutMs: 300,
    });
    m.start();
    await eventually(async () => expect(await holder(lease)).toBe('slow'));
    const began = Date.now();
    await m.shutdown();
    expect(Date.now() - began).toBeLessThan(2_000);
    expect(await holder(lease)).toBe('');
  });

  it('runs the work on the leader only; shutdown drains first, then releases the Lease', async () => {
    const lease = `mgr${++leaseCounter}`;
    const a = replica(lease, 'a');
    await eventually(() => expect(a.started).toBe(1));
    const b = replica(lease, 'b');
    await sleep(600);
    expect(b.started).toBe(0);
    await a.manager.shutdown();
    expect(a.stops).toEqual([20_000]);
    expect(a.holderAtStop).toEqual(['a']); // still held while draining
    expect(a.lost).toBe(0);
    // Released: taken on the next retry, without waiting out the 6 s LeaseDuration.
    await eventually(() => expect(b.started).toBe(1), 5000);
    expect(await holder(lease)).toBe('b');
    await b.manager.shutdown();
    expect(await holder(lease)).toBe('');
  });

  it('losing the Lease exits at once, without draining', async () => {
    const lease = `mgr${++leaseCounter}`;
    const a = replica(lease, 'a');
    await eventually(() => expect(a.started).toBe(1));
    server.faults.delayNext(1000, 6000, (r) => r.path.endsWith(`/leases/${lease}`));
    await eventually(() => expect(a.lost).toBe(1), 9000);
    expect(a.stops).toEqual([]);
    server.faults.clear();
  });
});
