// Replicated acknowledgements (replica-acks.ts) on a real redis-server with a real
// replica: an execution is promised (start resolves, the API's 202) only once the
// replica has it; a replica that does not answer turns the promise into a 503 that
// names it, and the retry of the same execution id gets that execution, queued once.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shardedSubscriberClient, type RedisClient } from '../../api/records/redis-client.ts';
import { connectRedis } from '../../roles/redis.ts';
import { HttpProblem } from '../../runtime/errors.ts';
import { RedisExecutionEvents } from '../../runtime/engine/execution-events-redis.ts';
import { ExecutionLayout } from '../../runtime/engine/execution-keys.ts';
import { RedisExecutionStore } from '../../runtime/engine/execution-store-redis.ts';
import { QueuedEngine } from '../../runtime/engine/queued-engine.ts';
import { ReplicaAcks } from '../../runtime/engine/replica-acks.ts';
import { redisAvailable, startReplicated, type RedisServer } from '../support/redis.ts';
import { startRedisCluster, type RedisCluster } from '../support/redis-cluster.ts';
import { ref, trigger, workflow } from './helpers.ts';

describe.skipIf(!redisAvailable())('replicated acknowledgements (one master, one replica)', () => {
  let master: RedisServer;
  let replica: RedisServer;
  const clients: Redis[] = [];
  const connect = (url: string) => {
    const c = new Redis(url, { enableAutoPipelining: true });
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    ({ master, replica } = await startReplicated());
  }, 30_000);
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    replica?.resume();
    await replica?.stop();
    await master?.stop();
  });

  const gateway = (acks: ReplicaAcks | undefined) => {
    const redis = connect(master.url);
    const store = new RedisExecutionStore({ redis });
    const subscriber = shardedSubscriberClient(redis);
    clients.push(subscriber as Redis);
    const events = new RedisExecutionEvents({ subscriber, store });
    const engine = new QueuedEngine({
      redis,
      store,
      events,
      ...(acks ? { replicaAcks: acks } : {}),
    });
    return { engine, store };
  };
  const request = (n: number, executionId = '') => ({
    workflow: workflow([{ id: 'a', type: 'transform', expression: '{ "n": body.n }' }]),
    trigger: ref(),
    input: trigger({ n }, executionId),
  });

  it('promises an execution the replica has, with WAITs shared between concurrent requests', async () => {
    const acks = new ReplicaAcks({ replicas: 1, timeoutMs: 2_000 });
    const { engine, store } = gateway(acks);
    try {
      const onReplica = connect(replica.url);
      const started = await Promise.all(
        Array.from({ length: 100 }, (_, n) =>
          engine
            .start(request(n))
            .then(async (e) => [
              e.id,
              await onReplica.exists(store.layout.of(e.id).execution(e.id)),
            ]),
        ),
      );
      // Each promise was kept on the replica by the time it was made.
      expect(started.filter(([, exists]) => exists !== 1)).toEqual([]);
      // A group commit: far fewer WAITs than requests (each blocks the connection).
      console.info(`WAITs for 100 executions: ${acks.waits}`);
      expect(acks.waits).toBeGreaterThan(0);
      expect(acks.waits).toBeLessThan(25);
    } finally {
      engine.close();
    }
  });

  it('answers 503 store-unavailable when the replica does not answer, and the retry gets the same execution', async () => {
    const acks = new ReplicaAcks({ replicas: 1, timeoutMs: 200 });
    const { engine, store } = gateway(acks);
    const plain = gateway(undefined);
    const id = 'exec_replica-retry';
    replica.pause();
    try {
      const began = Date.now();
      const refusal = await engine.start(request(1, id)).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(refusal).toBeInstanceOf(HttpProblem);
      expect((refusal as HttpProblem).code).toBe('HG_ERR_STORE_UNAVAILABLE');
      expect((refusal as HttpProblem).headers).toMatchObject({ 'retry-after': '1' });
      expect((refusal as HttpProblem).message).toMatch(/0 of the 1 Redis replicas/);
      expect(Date.now() - began).toBeGreaterThanOrEqual(150);
      // Without replica acknowledgements the same Redis answers at once.
      await expect(plain.engine.start(request(2))).resolves.toMatchObject({ status: 'queued' });
    } finally {
      replica.resume();
    }
    // The retry (the Idempotency-Key's resume hint gives it the same id) is promised,
    // and the execution is queued once.
    const again = await engine.start(request(1, id));
    expect(again.id).toBe(id);
    const stream = store.layout.of(id).stream;
    const jobs = await connect(master.url).xrange(stream, '-', '+');
    expect(jobs.filter(([, fields]) => String(fields[1]).includes(id))).toHaveLength(1);
    engine.close();
    plain.engine.close();
  });
});

describe.skipIf(!redisAvailable())(
  'replicated acknowledgements on a Redis Cluster (3 masters, a replica each, 12 shards)',
  () => {
    let cluster: RedisCluster;
    let replicas: RedisServer[];
    const clients: RedisClient[] = [];
    beforeAll(async () => {
      cluster = await startRedisCluster({ replicasPerMaster: 1 });
      replicas = await cluster.linkedReplicas();
      expect(replicas).toHaveLength(3);
    }, 60_000);
    afterAll(async () => {
      for (const c of clients) c.disconnect();
      for (const r of replicas ?? []) r.resume();
      await cluster?.stop();
    });

    const gateway = (acks: ReplicaAcks) => {
      const redis = connectRedis(cluster.url, { commandTimeout: 10_000 });
      clients.push(redis);
      const layout = new ExecutionLayout({ shards: 12, cluster: true });
      const store = new RedisExecutionStore({ redis, layout });
      const subscriber = shardedSubscriberClient(redis);
      clients.push(subscriber);
      const events = new RedisExecutionEvents({ subscriber, store });
      return { engine: new QueuedEngine({ redis, store, events, replicaAcks: acks }), layout };
    };
    const request = (n: number) => ({
      workflow: workflow([{ id: 'a', type: 'transform', expression: '{ "n": body.n }' }]),
      trigger: ref(),
      input: trigger({ n }),
    });

    it('shares WAITs between the shards of a master: a handful for 60 executions on 12 shards', async () => {
      const acks = new ReplicaAcks({ replicas: 1, timeoutMs: 2_000 });
      const { engine, layout } = gateway(acks);
      try {
        await engine.start(request(0)); // the client learns the slot map
        const before = acks.waits;
        const started = await Promise.all(
          Array.from({ length: 60 }, (_, n) => engine.start(request(n))),
        );
        const shards = new Set(started.map((e) => layout.shardOf(e.id)));
        console.info(`WAITs for 60 executions on ${shards.size} shards: ${acks.waits - before}`);
        expect(shards.size).toBeGreaterThan(6);
        // A group per shard sent at least one WAIT per shard used.
        expect(acks.waits - before).toBeLessThan(shards.size);
        expect(acks.counts.confirmed).toBe(61);
      } finally {
        engine.close();
      }
    });

    it('answers every request within about its timeout when the replicas do not answer, not a timeout per shard', async () => {
      const timeoutMs = 300;
      const acks = new ReplicaAcks({ replicas: 1, timeoutMs });
      const { engine } = gateway(acks);
      await engine.start(request(0));
      for (const r of replicas) r.pause();
      try {
        const began = Date.now();
        const answers = await Promise.all(
          Array.from({ length: 36 }, (_, n) =>
            engine.start(request(n)).then(
              () => ({ ms: Date.now() - began, error: undefined }),
              (error: unknown) => ({ ms: Date.now() - began, error }),
            ),
          ),
        );
        const slowest = Math.max(...answers.map((a) => a.ms));
        console.info(`36 refusals on 12 shards, the slowest after ${slowest} ms`);
        for (const { error } of answers) {
          expect(error).toBeInstanceOf(HttpProblem);
          expect((error as HttpProblem).message).toMatch(/0 of the 1 Redis replicas/);
        }
        // One WAIT on the wire per master and the next one behind it: two timeouts (740
        // ms here). A group per shard queued four shards' WAITs on each master's
        // connection, each with the next one behind it (2,760 ms).
        expect(slowest).toBeLessThan(5 * timeoutMs);
      } finally {
        for (const r of replicas) r.resume();
        engine.close();
      }
    });
  },
);
