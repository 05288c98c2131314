// The event recorder against the in-memory API server: Events are created with the
// involved object, repeats are aggregated into `count`, and a noisy object is
// rate-limited.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeClock } from '../../operator/controller/clock.ts';
import { EventReason, EventRecorder, EventType } from '../../operator/controller/events.ts';
import type { KubeClient } from '../../operator/controller/kube-client.ts';
import type { KubeApiServer } from '../../testing/kube-apiserver/index.ts';
import { startTestCluster, type TestCluster } from '../support/test-cluster.ts';

let cluster: TestCluster;
let server: KubeApiServer;
let client: KubeClient;

beforeAll(async () => {
  cluster = await startTestCluster();
  ({ server, client } = cluster);
});

afterAll(() => cluster.close());

interface EventObj {
  involvedObject: { kind: string; name: string; namespace: string; uid?: string };
  reason: string;
  message: string;
  type: string;
  count: number;
  source?: { component?: string };
}

const obj = (name: string) => ({
  apiVersion: 'hookgate.dev/v1alpha1',
  kind: 'WebhookTrigger',
  metadata: { name, namespace: 'default', uid: `uid-${name}` },
});

async function eventsFor(name: string): Promise<EventObj[]> {
  const list = await client.request<{ items: EventObj[] }>(
    'GET',
    '/api/v1/namespaces/default/events',
  );
  return list.items.filter((e) => e.involvedObject.name === name);
}

describe('EventRecorder', () => {
  it('creates an Event about the object with type, reason, message and source', async () => {
    const rec = new EventRecorder({ client, component: 'hookgate-operator', instance: 'pod-1' });
    rec.event(obj('one'), EventType.Warning, 'SecretNotFound', 'secret "keys" not found');
    await rec.flush();
    const [e, ...rest] = await eventsFor('one');
    expect(rest).toEqual([]);
    expect(e).toMatchObject({
      involvedObject: { kind: 'WebhookTrigger', name: 'one', namespace: 'default', uid: 'uid-one' },
      type: 'Warning',
      reason: 'SecretNotFound',
      message: 'secret "keys" not found',
      count: 1,
      source: { component: 'hookgate-operator' },
    });
  });

  it('aggregates a repeated event into one Event with a count', async () => {
    const rec = new EventRecorder({ client, component: 'hookgate-operator' });
    for (let i = 0; i < 3; i++) {
      rec.event(obj('two'), EventType.Warning, EventReason.CleanupFailed, 'store down');
      await rec.flush();
    }
    rec.event(obj('two'), EventType.Normal, 'Published', 'workflow registered');
    await rec.flush();
    const events = await eventsFor('two');
    expect(events.map((e) => `${e.reason}:${e.count}`).sort()).toEqual([
      'CleanupFailed:3',
      'Published:1',
    ]);
  });

  it('drops events over the per-object burst and recovers as tokens refill', async () => {
    const clock = new FakeClock();
    const rec = new EventRecorder({ client, component: 'x', burst: 3, qps: 1, clock });
    for (let i = 0; i < 5; i++) rec.event(obj('three'), EventType.Normal, `R${i}`, 'm');
    await rec.flush();
    expect(rec.dropped).toBe(2);
    expect(await eventsFor('three')).toHaveLength(3);
    clock.step(1000);
    rec.event(obj('three'), EventType.Normal, 'Later', 'm');
    await rec.flush();
    expect(await eventsFor('three')).toHaveLength(4);
    // Another object has its own bucket.
    rec.event(obj('four'), EventType.Normal, 'R', 'm');
    await rec.flush();
    expect(await eventsFor('four')).toHaveLength(1);
  });

  it('bounds the queue: beyond maxQueued events are dropped and counted, none in flight for them', async () => {
    const rec = new EventRecorder({
      client,
      component: 'x',
      maxQueued: 3,
      maxInFlight: 1,
      writeBurst: 4,
    });
    server.clearRequests();
    for (let i = 0; i < 10; i++) rec.event(obj(`q${i}`), EventType.Normal, 'Ready', 'm');
    // One write in flight, three waiting, six dropped.
    expect(rec.dropped).toBe(6);
    await rec.flush();
    const posts = server.requests.filter((r) => r.method === 'POST' && r.path.endsWith('/events'));
    expect(posts).toHaveLength(4);
  });

  it('writes at most writeBurst events at once, then writeQps per second', async () => {
    const rec = new EventRecorder({ client, component: 'x', writeBurst: 2, writeQps: 20 });
    const started = performance.now();
    for (let i = 0; i < 6; i++) rec.event(obj(`r${i}`), EventType.Normal, 'Ready', 'm');
    await rec.flush();
    // Two at once, the four others one every 50 ms.
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);
    expect(rec.dropped).toBe(0);
    for (let i = 0; i < 6; i++) expect(await eventsFor(`r${i}`)).toHaveLength(1);
  });

  it('never throws when the API server refuses', async () => {
    const logs: string[] = [];
    const rec = new EventRecorder({ client, component: 'x', log: (m) => logs.push(m) });
    server.faults.failNext(1, 500, (r) => r.path.endsWith('/events'));
    rec.event(obj('five'), EventType.Warning, 'R', 'm');
    await rec.flush();
    expect(logs).toEqual(['failed to record event']);
  });
});
