// The informers' watches ask for bookmarks and a server-side timeout, as client-go's
// reflector does, against the in-memory API server with a small history window (its
// watch cache) and frequent bookmarks: a quiet watch (nothing it watches changes while
// everything else does) resumes after a timeout or a dropped stream from the
// resourceVersion of its last bookmark, not from its list's, which the window has
// left behind by then (410 Expired, then a relist of everything).
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { LoggedRequest } from '../../testing/kube-apiserver/index.ts';
import { StoppableWatch } from '../../operator/sources/kube-informer.ts';
import {
  CREDENTIALS_LABEL,
  KubernetesSource,
  resourcePath,
  type KubernetesSourceOptions,
} from '../../operator/sources/kubernetes.ts';
import type { ObjectRef } from '../../operator/sources/ports.ts';
import { eventually, sleep } from '../support/eventually.ts';
import { startTestCluster, type TestCluster } from '../support/test-cluster.ts';

const HISTORY_WINDOW = 20;
const BOOKMARK_MS = 100;

let cluster: TestCluster;
let nsCounter = 0;
const sources: KubernetesSource[] = [];

beforeAll(async () => {
  cluster = await startTestCluster({
    crds: true,
    server: { historyWindow: HISTORY_WINDOW, bookmarkIntervalMs: BOOKMARK_MS },
  });
});

afterEach(async () => {
  await Promise.all(sources.splice(0).map((s) => s.stop()));
});

afterAll(() => cluster.close());

async function newNamespace(): Promise<string> {
  const name = `wb${++nsCounter}`;
  await cluster.client.request('POST', '/api/v1/namespaces', { body: { metadata: { name } } });
  return name;
}

/** A source over one namespace, started; `changes` are its onChange calls. */
async function startSource(ns: string, extra: Partial<KubernetesSourceOptions> = {}) {
  const changes: ObjectRef[] = [];
  const source = new KubernetesSource({
    kubeConfig: cluster.kc,
    namespace: ns,
    restartBackoff: { initialMs: 50, maxMs: 200 },
    syncTimeoutMs: 10_000,
    ...extra,
  });
  sources.push(source);
  await source.start((ref) => void changes.push(ref));
  return { source, changes };
}

const PLURALS = ['workflows', 'webhooktriggers', 'secrets'] as const;

/** The requests of `ns`'s `plural` collection: its lists and its watches. */
function requestsOf(ns: string, plural: string) {
  const mine = cluster.server.requests.filter(
    (r) => r.method === 'GET' && r.path.endsWith(`/namespaces/${ns}/${plural}`),
  );
  return {
    lists: mine.filter((r) => r.query.watch === undefined),
    watches: mine.filter((r) => r.query.watch !== undefined),
  };
}

/** How many watches of each collection `ns` has had. */
const watchCounts = (ns: string): Record<string, number> =>
  Object.fromEntries(PLURALS.map((p) => [p, requestsOf(ns, p).watches.length] as const));

/** Writes to another namespace's ConfigMaps: nothing the source watches changes. */
async function churn(count: number): Promise<void> {
  const ns = await newNamespace();
  for (let i = 0; i < count; i++) {
    await cluster.client.request('POST', `/api/v1/namespaces/${ns}/configmaps`, {
      body: { metadata: { name: `c${i}` }, data: { i: String(i) } },
    });
  }
}

/** Polls until `done` or `ms` passed; no assertion of its own. */
async function until(done: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!done() && Date.now() < deadline) await sleep(20);
}

const rvOf = (r: LoggedRequest) => Number(r.query.resourceVersion ?? 0);

describe('informer watches: bookmarks and a server-side timeout', () => {
  it('a quiet watch resumes past the watch cache compacting its list RV without a relist (closed streams, then timeouts)', async () => {
    const ns = await newNamespace();
    await cluster.client.request('POST', resourcePath('Secret', ns), {
      body: {
        metadata: { name: 'keys', namespace: ns, labels: { [CREDENTIALS_LABEL]: 'true' } },
        data: { k: Buffer.from('v').toString('base64') },
      },
    });
    // Server-side timeouts of 1 s: each watch asks for timeoutSeconds in [1, 2).
    const { source, changes } = await startSource(ns, { minWatchTimeoutSeconds: 1 });
    const listedAt = Number(source.resourceVersions().Secret);
    const changesAfterSync = changes.length;
    for (const plural of PLURALS) expect(requestsOf(ns, plural).lists).toHaveLength(1);

    // The watch cache moves on: more changes than its window holds, none of them ours.
    await churn(HISTORY_WINDOW * 2);
    const churned = cluster.server.resourceVersion();
    expect(churned - HISTORY_WINDOW).toBeGreaterThan(listedAt);
    // Bookmarks carry the informers to the current RV (without them, they stay at
    // their lists' RV: the watch then resumes from there and gets 410).
    const caughtUp = () =>
      Object.values(source.resourceVersions()).every((rv) => Number(rv) >= churned);
    await until(caughtUp, 5000);

    // Every stream dropped at once: each watch is opened again from its bookmark.
    const before = watchCounts(ns);
    cluster.server.closeWatches();
    await eventually(() => {
      for (const p of PLURALS)
        expect(requestsOf(ns, p).watches.length).toBeGreaterThan(before[p] ?? 0);
    });
    for (const p of PLURALS) {
      expect(requestsOf(ns, p).lists, `${p} relisted`).toHaveLength(1);
      const resumed = requestsOf(ns, p).watches.at(before[p] ?? 0);
      expect(rvOf(resumed!)).toBeGreaterThanOrEqual(churned);
    }
    expect(caughtUp()).toBe(true);

    // Again, the window moving on while the server ends the watches by their timeout.
    await churn(HISTORY_WINDOW * 2);
    const churnedAgain = cluster.server.resourceVersion();
    const counted = watchCounts(ns);
    await eventually(() => {
      for (const p of PLURALS) {
        const later = requestsOf(ns, p).watches.slice(counted[p]);
        expect(later.some((r) => rvOf(r) >= churnedAgain)).toBe(true);
      }
    });
    for (const p of PLURALS) expect(requestsOf(ns, p).lists, `${p} relisted`).toHaveLength(1);
    // Bookmarks move the resourceVersion only: nothing was reported as changed.
    expect(changes.slice(changesAfterSync)).toEqual([]);
    expect(source.getSecret(ns, 'keys')?.data).toEqual({ k: 'v' });
    expect(source.restarts()).toEqual({ Workflow: 0, WebhookTrigger: 0, Secret: 0 });
    for (const p of PLURALS) {
      for (const watch of requestsOf(ns, p).watches)
        expect(watch.query).toMatchObject({ allowWatchBookmarks: 'true', timeoutSeconds: '1' });
    }
  });

  it('a change after bookmarks is still seen, once, from the resumed watch', async () => {
    const ns = await newNamespace();
    const { source, changes } = await startSource(ns, { minWatchTimeoutSeconds: 1 });
    await churn(HISTORY_WINDOW * 2);
    const churned = cluster.server.resourceVersion();
    await until(
      () => Object.values(source.resourceVersions()).every((rv) => Number(rv) >= churned),
      5000,
    );
    cluster.server.closeWatches();
    await cluster.client.request('POST', resourcePath('Secret', ns), {
      body: {
        metadata: { name: 'late', namespace: ns, labels: { [CREDENTIALS_LABEL]: 'true' } },
        data: { k: Buffer.from('v2').toString('base64') },
      },
    });
    await eventually(() => expect(source.getSecret(ns, 'late')?.data).toEqual({ k: 'v2' }));
    expect(changes.filter((c) => c.name === 'late')).toEqual([
      { kind: 'Secret', namespace: ns, name: 'late' },
    ]);
    expect(requestsOf(ns, 'secrets').lists).toHaveLength(1);
  });

  it("the stream's idle timeout is ours: a stream quiet for longer is dropped and re-opened", async () => {
    // Bookmarks every 100 ms keep a stream with a 300 ms idle timeout open...
    const ns = await newNamespace();
    await startSource(ns, { watchIdleTimeoutMs: 300, minWatchTimeoutSeconds: 60 });
    await sleep(1200);
    for (const p of PLURALS) expect(requestsOf(ns, p).watches, p).toHaveLength(1);
    // ...where one that never hears from the server (client-node's own 30 s otherwise)
    // is re-opened from the same resourceVersion, without a relist.
    const quiet = await startTestCluster({ crds: true, server: { bookmarkIntervalMs: 60_000 } });
    try {
      const source = new KubernetesSource({
        kubeConfig: quiet.kc,
        namespace: 'default',
        watchIdleTimeoutMs: 300,
        minWatchTimeoutSeconds: 60,
        syncTimeoutMs: 10_000,
      });
      sources.push(source);
      await source.start(() => {});
      await eventually(() => {
        const watches = quiet.server.requests.filter(
          (r) => r.path.endsWith('/namespaces/default/secrets') && r.query.watch !== undefined,
        );
        expect(watches.length).toBeGreaterThanOrEqual(3);
      });
      const secrets = quiet.server.requests.filter((r) =>
        r.path.endsWith('/namespaces/default/secrets'),
      );
      expect(secrets.filter((r) => r.query.watch === undefined)).toHaveLength(1);
      await source.stop();
    } finally {
      await quiet.close();
    }
  });

  it('timeoutSeconds is drawn in [min, 2 × min), 5 to 10 minutes by default (client-go reflector)', () => {
    const draw = (random: number, min = 300) =>
      new StoppableWatch(cluster.kc, (o) => o, {
        minTimeoutSeconds: min,
        idleTimeoutMs: 90_000,
        random: () => random,
      }).timeoutSeconds();
    expect(draw(0)).toBe(300);
    expect(draw(0.5)).toBe(450);
    expect(draw(0.999_999)).toBe(599);
    expect(draw(0.7, 1)).toBe(1);
  });
});
