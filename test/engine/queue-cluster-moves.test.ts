// Executions queued and run on a Redis Cluster while the slots of queue shards move to
// another master, or a master fails over to its replica, under traffic (ADR 0021):
// every execution a gateway accepted (the 202 of the API) finishes, exactly once
// logically — one record that succeeded with its output, one `completed` event, events
// numbered without gaps — it is listed, and nothing is left in any shard's stream. The
// clients follow the ASK and MOVED redirects.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis, type Cluster } from 'ioredis';
import { shardedSubscriberClient, type RedisClient } from '../../api/records/redis-client.ts';
import { connectRedis, duplicateWith } from '../../roles/redis.ts';
import { InProcessEngine } from '../../runtime/engine/engine.ts';
import { RedisExecutionEvents } from '../../runtime/engine/execution-events-redis.ts';
import { ExecutionLayout } from '../../runtime/engine/execution-keys.ts';
import { RedisExecutionStore } from '../../runtime/engine/execution-store-redis.ts';
import { QueuedEngine } from '../../runtime/engine/queued-engine.ts';
import { readQueueState } from '../../runtime/engine/queue-state.ts';
import { ReplicaAcks } from '../../runtime/engine/replica-acks.ts';
import { triggerRef } from '../../runtime/engine/trigger-ref.ts';
import { ExecutionWorker, type JobTarget } from '../../runtime/engine/worker.ts';
import { eventually } from '../support/eventually.ts';
import { redisAvailable } from '../support/redis.ts';
import { startRedisCluster, type RedisCluster } from '../support/redis-cluster.ts';
import { route, trigger, workflow } from './helpers.ts';

/** Serves the slot of `key` now: the port of its master. */
async function ownerOf(admin: Cluster, key: string): Promise<number | undefined> {
  const slot = Number(await admin.cluster('KEYSLOT', key));
  return (await admin.cluster('SLOTS')).find(([f, t]) => slot >= f && slot <= t)?.[2]?.[1];
}

/**
 * The port of the replica of the master on `masterPort`, once its link is up (replicas
 * attach a moment after the cluster reports ok).
 */
async function linkedReplicaOf(admin: Cluster, masterPort: number | undefined): Promise<number> {
  const port = await eventually(
    async () => {
      const nodes = String(await admin.cluster('NODES'))
        .trim()
        .split('\n');
      const masterId = nodes.find((l) => l.includes(`:${masterPort}@`))?.split(' ')[0];
      const replica = nodes.find((l) => masterId && l.split(' ')[3] === masterId);
      const found = Number(/:(\d+)@/.exec(replica ?? '')?.[1]);
      expect(found).toBeGreaterThan(0);
      return found;
    },
    30_000,
    100,
  );
  const node = new Redis({ port, host: '127.0.0.1' });
  try {
    await eventually(
      async () => expect(await node.info('replication')).toContain('master_link_status:up'),
      30_000,
      100,
    );
  } finally {
    node.disconnect();
  }
  return port;
}

/**
 * Gateways queue and two workers run executions on `cluster` while `disrupt` runs;
 * then every accepted execution must have finished exactly once logically, be listed,
 * and no job be left. `disrupt` gets the shards and returns when its change is done;
 * `trafficGoesOn` resolves once more executions have been accepted after its call (for a
 * change of several steps, so that traffic runs between them however fast each is).
 */
async function underTraffic(
  cluster: RedisCluster,
  disrupt: (layout: ExecutionLayout, trafficGoesOn: () => Promise<void>) => Promise<void>,
  options: { refusals: 'none' | 'allowed'; replicaAcks?: ReplicaAcks },
): Promise<{ refused: number }> {
  const clients: RedisClient[] = [];
  const layout = new ExecutionLayout({ shards: 6, cluster: true });
  // The roles' options (roles/redis.ts), with a generous timeout for a loaded machine.
  const connect = () => {
    const c = connectRedis(cluster.url, { commandTimeout: 10_000, maxRetriesPerRequest: 3 });
    clients.push(c);
    return c;
  };
  const target: JobTarget = {
    route: route('shop/orders-hook'),
    workflow: workflow([{ id: 'a', type: 'transform', expression: '{ "n": body.n }' }]),
  };
  const redis = connect();
  const store = new RedisExecutionStore({ redis, layout });
  const subscriber = shardedSubscriberClient(redis);
  clients.push(subscriber);
  const events = new RedisExecutionEvents({ subscriber, store });
  const gateway = new QueuedEngine({
    redis,
    store,
    events,
    ...(options.replicaAcks ? { replicaAcks: options.replicaAcks } : {}),
  });
  const workers = ['w1', 'w2'].map((consumer) => {
    const r = connect();
    const s = new RedisExecutionStore({ redis: r, layout });
    const blocking = duplicateWith(r, { commandTimeout: undefined, blockingTimeout: 10_000 });
    clients.push(blocking);
    return new ExecutionWorker({
      redis: r,
      blocking,
      engine: new InProcessEngine({ store: s, streamEvents: true, onInternalError: () => {} }),
      store: s,
      consumer,
      concurrency: 8,
      blockMs: 200,
      claimIdleMs: 5_000,
      resolve: () => Promise.resolve(target),
      onInternalError: () => {},
    });
  });
  try {
    for (const w of workers) await w.start();
    const accepted = new Map<string, number>();
    const refused: unknown[] = [];
    let refusedCount = 0;
    let next = 0;
    let stopAt = Number.POSITIVE_INFINITY;
    const client = async () => {
      while (next < stopAt) {
        const n = next++;
        try {
          const e = await gateway.start({
            workflow: target.workflow,
            trigger: triggerRef(target.route),
            input: trigger({ n }),
          });
          accepted.set(e.id, n);
        } catch (error) {
          // Not accepted (the API would answer 503): no promise made. Kept few, and
          // paced, so a long outage does not fill the memory.
          refusedCount++;
          if (refused.length < 20) refused.push(error);
          await new Promise((r) => setTimeout(r, 20));
        }
      }
    };
    const traffic = Promise.all(Array.from({ length: 6 }, client));
    while (accepted.size < 50) await new Promise((r) => setTimeout(r, 5));
    const atStart = accepted.size;
    const trafficGoesOn = async () => {
      const from = accepted.size;
      await eventually(() => expect(accepted.size).toBeGreaterThan(from), 30_000, 5);
    };
    await disrupt(layout, trafficGoesOn);
    const during = accepted.size - atStart;
    stopAt = next + 100;
    await traffic;

    // Accepted while the change went on, not only before and after.
    expect(during).toBeGreaterThan(0);
    if (options.refusals === 'none') {
      expect(refused).toEqual([]);
      expect(accepted.size).toBe(stopAt);
    }
    expect(accepted.size + refusedCount).toBe(stopAt);
    await eventually(
      async () => expect((await readQueueState(redis, layout.streams)).depth).toBe(0),
      60_000,
      200,
    );
    for (const [id, n] of accepted) {
      const e = await store.get(id);
      expect([id, e?.status, e?.output]).toEqual([id, 'succeeded', { n }]);
      const history = await store.events(id, 0);
      expect(history.map((h) => h.seq)).toEqual(history.map((_h, i) => i + 1));
      expect(history.filter((h) => h.type === 'completed')).toHaveLength(1);
    }
    // Every execution is in the listing, merged over the shards.
    const listed = new Set<string>();
    let cursor: string | undefined;
    do {
      const page = await store.page({ limit: 200, ...(cursor ? { cursor } : {}) });
      for (const e of page.items) listed.add(e.id);
      cursor = page.next;
    } while (cursor);
    expect([...accepted.keys()].filter((id) => !listed.has(id))).toEqual([]);
    return { refused: refusedCount };
  } finally {
    for (const w of workers) await w.close(5_000);
    gateway.close();
    for (const c of clients) c.disconnect();
  }
}

/**
 * A cluster of 3 masters for the describe this is called in: started (replicas linked)
 * before its tests, stopped after; `admin` is a client of the test's own.
 */
function clusterOfSuite(options: { replicasPerMaster?: number } = {}) {
  const suite = {} as { cluster: RedisCluster; admin: Cluster };
  beforeAll(async () => {
    suite.cluster = await startRedisCluster(options);
    await suite.cluster.linkedReplicas();
    suite.admin = suite.cluster.client();
  }, 60_000);
  afterAll(async () => {
    suite.admin?.disconnect();
    await suite.cluster?.stop();
  });
  return suite;
}

/**
 * Moves the slots of the first two shards to other masters, one after the other, with
 * executions accepted in between: a move of one slot and a few keys can take less than
 * one request does on a loaded machine (CI saw none accepted during both).
 */
const moveTwoShards =
  (cluster: RedisCluster, admin: Cluster) =>
  async (layout: ExecutionLayout, trafficGoesOn: () => Promise<void>): Promise<void> => {
    for (const [i, shard] of layout.shards.slice(0, 2).entries()) {
      if (i > 0) await trafficGoesOn();
      const before = await ownerOf(admin, shard.stream);
      await cluster.moveSlot(Number(await admin.cluster('KEYSLOT', shard.stream)));
      expect(await ownerOf(admin, shard.stream)).not.toBe(before);
    }
  };

describe.skipIf(!redisAvailable())('the execution queue while shard slots move', () => {
  const suite = clusterOfSuite();

  it('every accepted execution finishes exactly once while two shards move', async () => {
    const { cluster, admin } = suite;
    await underTraffic(cluster, moveTwoShards(cluster, admin), { refusals: 'none' });
  }, 120_000);
});

// With replicas and replica acknowledgements: while a slot moves, the marker script in
// the WAIT's pipeline gets ASK or MOVED, which ioredis does not follow in a pipeline
// holding a write that succeeded (the WAIT); and after a MOVED it may refuse a pipeline
// over two slots of one master until it refreshed its slot map. No request may be
// answered 503 for either (replica-acks.ts asks again).
describe.skipIf(!redisAvailable())(
  'the execution queue while shard slots move, 202s acknowledged by replicas',
  () => {
    const suite = clusterOfSuite({ replicasPerMaster: 1 });

    it('every execution is acknowledged and finishes exactly once while two shards move', async () => {
      const { cluster, admin } = suite;
      const acks = new ReplicaAcks({ replicas: 1, timeoutMs: 2_000 });
      await underTraffic(cluster, moveTwoShards(cluster, admin), {
        refusals: 'none',
        replicaAcks: acks,
      });
      console.info(`replica acknowledgements: ${JSON.stringify(acks.counts)}`);
      expect(acks.counts.failed + acks.counts.unconfirmed).toBe(0);
    }, 120_000);
  },
);

describe.skipIf(!redisAvailable())('the execution queue while a master fails over', () => {
  const suite = clusterOfSuite({ replicasPerMaster: 1 });

  it('every accepted execution finishes exactly once while a replica takes over a master', async () => {
    const { cluster, admin } = suite;
    const { refused } = await underTraffic(
      cluster,
      async (layout) => {
        const stream = (layout.shards[0] as { stream: string }).stream;
        const before = await ownerOf(admin, stream);
        // The replica of that master takes over (CLUSTER FAILOVER: coordinated, the
        // replica catches up first, so nothing acknowledged is lost).
        const port = await linkedReplicaOf(admin, before);
        const node = new Redis({ port, host: '127.0.0.1' });
        try {
          await node.cluster('FAILOVER');
          await eventually(
            async () => expect(await ownerOf(admin, stream)).toBe(port),
            20_000,
            100,
          );
        } finally {
          node.disconnect();
        }
      },
      { refusals: 'allowed' },
    );
    // Requests refused while the master was switching (answered 503, nothing promised).
    console.info(`refused during the failover: ${refused}`);
  }, 120_000);
});

describe.skipIf(!redisAvailable())('the execution queue while a master dies', () => {
  const suite = clusterOfSuite({ replicasPerMaster: 1 });

  // No coordination: the master is killed (SIGKILL) while its replica lags behind
  // (frozen for a moment, as a replica on a slow link or a busy host, with a large
  // write ahead of the executions in the replication stream), and the replica
  // is elected after the node timeout. What the master acknowledged and had not sent
  // yet is gone with it: without replica acknowledgements this loses executions that
  // were answered 202 (tried: the test fails). With HOOKGATE_QUEUE_ACK_REPLICAS=1
  // nothing was promised before the replica had it.
  it('every execution accepted with a replica acknowledgement finishes exactly once', async () => {
    const { cluster, admin } = suite;
    const acks = new ReplicaAcks({ replicas: 1, timeoutMs: 300 });
    const { refused } = await underTraffic(
      cluster,
      async (layout) => {
        const stream = (layout.shards[0] as { stream: string }).stream;
        const before = await ownerOf(admin, stream);
        const replicaPort = await linkedReplicaOf(admin, before);
        const master = cluster.nodes.find((n) => n.port === before);
        const replica = cluster.nodes.find((n) => n.port === replicaPort);
        if (!master || !replica) throw new Error(`no nodes on ports ${before}, ${replicaPort}`);
        replica.pause();
        try {
          // The kernel holds a few MB for the frozen replica, which it would read on
          // waking: a value larger than that, on the same master, keeps what follows in
          // the master's own buffer, lost with it.
          await admin.set(`${stream}:ballast`, 'x'.repeat(32 * 1024 * 1024));
          await new Promise((r) => setTimeout(r, 1_000));
          await master.kill();
        } finally {
          replica.resume();
        }
        await eventually(
          async () => expect(await ownerOf(admin, stream)).toBe(replicaPort),
          30_000,
          200,
        );
      },
      { refusals: 'allowed', replicaAcks: acks },
    );
    console.info(`refused while the master was dead: ${refused}; WAITs: ${acks.waits}`);
  }, 120_000);
});
