// The Redis execution queue: gateways' QueuedEngine enqueues, ExecutionWorkers run,
// everything through a real redis-server (one shard, today's key names) and a real
// Redis Cluster of three masters (six shards, ADR 0021). At least once (G14): a job
// abandoned by a dead worker is run again by another, with the same execution id.
import { describe, expect, it, vi } from 'vitest';
import type { RedisClient } from '../../api/records/redis-client.ts';
import type { WorkflowNode } from '../../api/v1alpha1/workflow.ts';
import { InProcessEngine } from '../../runtime/engine/engine.ts';
import { FINISHED_GRACE_MS } from '../../runtime/engine/execution-store.ts';
import { RedisExecutionStore } from '../../runtime/engine/execution-store-redis.ts';
import type { SequencedEvent } from '../../runtime/engine/ports.ts';
import { WORKER_GROUP } from '../../runtime/engine/execution-keys.ts';
import { readQueueState } from '../../runtime/engine/queue-state.ts';
import { triggerRef } from '../../runtime/engine/trigger-ref.ts';
import type { JobTarget } from '../../runtime/engine/worker.ts';
import { HttpProblem } from '../../runtime/errors.ts';
import { eventually, sleep } from '../support/eventually.ts';
import { redisAvailable } from '../support/redis.ts';
import { redisCluster, singleRedis } from '../support/redis-backends.ts';
import { credentialLeaks, finished, route, trigger, workflow } from './helpers.ts';
import { redisQueueHarness } from './queue-harness.ts';

for (const [name, start, shards] of [
  ['one Redis', singleRedis, 1],
  ['a Redis Cluster of 3 masters, 6 shards', redisCluster, 6],
] as const)
  describe.skipIf(!redisAvailable())(`Redis execution queue on ${name}`, () => {
    const q = redisQueueHarness(start, shards);
    const { client, depth, gateway, worker } = q;
    /** `n` execution ids (`<prefix><i>`) that all fall in one shard. */
    const sameShard = (prefix: string, n: number) => {
      const ids: string[] = [];
      for (let i = 0; ids.length < n; i++)
        if (q.layout.shardOf(`${prefix}${i}`) === q.layout.shardOf(`${prefix}0`))
          ids.push(`${prefix}${i}`);
      return ids;
    };
    /** `n` execution ids in as many different shards as there are (n ≤ shards, or one). */
    const spread = (prefix: string, n: number) => {
      const ids: string[] = [];
      const used = new Set<number>();
      for (let i = 0; ids.length < n; i++) {
        const shard = q.layout.shardOf(`${prefix}${i}`);
        if (shards > 1 && used.has(shard)) continue;
        used.add(shard);
        ids.push(`${prefix}${i}`);
      }
      return ids;
    };

    /** The worker group's consumers (name -> pending entries) over the shards' streams. */
    async function consumersOf(redis: RedisClient): Promise<Record<string, number>> {
      const found: Record<string, number> = {};
      for (const stream of q.layout.streams) {
        if ((await redis.exists(stream)) === 0) continue;
        const reply = (await redis.xinfo('CONSUMERS', stream, WORKER_GROUP)) as unknown[][];
        for (const fields of reply) {
          const name = String(fields[fields.indexOf('name') + 1]);
          found[name] = (found[name] ?? 0) + Number(fields[fields.indexOf('pending') + 1]);
        }
      }
      return found;
    }

    /** Deploys for the workers; returns what a gateway hands the engine. */
    function deploy(nodes: Partial<WorkflowNode>[], key = 'shop/orders-hook') {
      const target: JobTarget = { route: route(key), workflow: workflow(nodes) };
      q.targets.set(key, target);
      return { workflow: target.workflow, trigger: triggerRef(target.route) };
    }

    it('a job that waits longer than the lifetime still runs: a queued record has no expiry', async () => {
      q.storeTtlMs = 1_000;
      const target = deploy([{ id: 'n', type: 'transform', expression: '{ "ran": true }' }]);
      const g = gateway();
      const queued = await g.engine.start({ ...target, input: trigger({}) });
      const key = q.layout.of(queued.id).execution(queued.id);
      const redis = client();
      expect(await redis.pttl(key)).toBe(-1);
      await sleep(1_500); // past its lifetime, still waiting for a worker
      expect((await g.engine.get(queued.id))?.status).toBe('queued');
      const done = finished(g.engine, queued.id);
      await worker().start();
      expect(await done).toMatchObject({ status: 'succeeded', output: { ran: true } });
      // Finished past its lifetime: it stays readable for the grace, then goes.
      const left = await redis.pttl(key);
      expect(left).toBeGreaterThan(FINISHED_GRACE_MS - 10_000);
      expect(left).toBeLessThanOrEqual(FINISHED_GRACE_MS);
    });

    it('a job that waits longer than the lifetime is listed while it waits, and for the grace once it has finished', async () => {
      q.storeTtlMs = 1_000;
      const target = deploy([{ id: 'n', type: 'transform', expression: '{ "ran": true }' }]);
      const g = gateway();
      const first = await g.engine.start({ ...target, input: trigger({}) });
      await sleep(5); // created in another millisecond: listed after the second
      const second = await g.engine.start({ ...target, input: trigger({}) });
      await sleep(1_500); // past their lifetime, still waiting for a worker
      const listed = async () =>
        (await g.engine.list({ triggerKey: 'shop/orders-hook' })).map((e) => [e.id, e.status]);
      expect(await listed()).toEqual([
        [second.id, 'queued'],
        [first.id, 'queued'],
      ]);
      expect((await g.engine.page({ limit: 1 })).items.map((e) => e.id)).toEqual([second.id]);
      const done = Promise.all([finished(g.engine, first.id), finished(g.engine, second.id)]);
      await worker().start();
      await done;
      // Finished past their lifetime: listed as long as they are read (the grace).
      expect(await listed()).toEqual([
        [second.id, 'succeeded'],
        [first.id, 'succeeded'],
      ]);
    });

    it('a caller watching a queued execution gives it no expiry: it still runs after its lifetime', async () => {
      q.storeTtlMs = 1_000;
      const target = deploy([{ id: 'n', type: 'transform', expression: '{ "ran": true }' }]);
      const g = gateway();
      const queued = await g.engine.start({ ...target, input: trigger({}) });
      const key = q.layout.of(queued.id).execution(queued.id);
      const redis = client();
      // A caller waits for the result (a synchronous endpoint, an event stream) at once.
      const done = finished(g.engine, queued.id);
      await eventually(async () => expect(await redis.hget(key, 'w')).toBe('s'));
      expect(await redis.pttl(key)).toBe(-1);
      await sleep(1_500); // past its lifetime, still waiting for a worker
      await worker().start();
      expect(await done).toMatchObject({ status: 'succeeded', output: { ran: true } });
    });

    it('keeps the uid of the trigger a job was accepted under, whatever the route of its name is when it runs', async () => {
      const target = deploy([{ id: 'n', type: 'transform', expression: '{ "ran": true }' }]);
      const g = gateway();
      const queued = await g.engine.start({ ...target, input: trigger({}) });
      expect(queued.triggerUid).toBe('uid-1');
      // The route of its name changes (an edit: the same uid) before a worker takes it.
      const now = q.targets.get('shop/orders-hook') as JobTarget;
      q.targets.set('shop/orders-hook', { ...now, route: { ...now.route, generation: 2 } });
      const done = finished(g.engine, queued.id);
      await worker().start();
      expect(await done).toMatchObject({ status: 'succeeded', triggerUid: 'uid-1' });
    });

    it('a job whose trigger was deleted and re-created before it ran fails like one whose trigger is gone, and runs nothing of the newcomer; a job without a uid runs as before', async () => {
      const target = deploy([{ id: 'n', type: 'transform', expression: '{ "ran": true }' }]);
      const g = gateway();
      const queued = await g.engine.start({ ...target, input: trigger({}) });
      // Queued by a gateway from before uids were kept: its record has none.
      const { uid: _uid, ...before } = target.trigger;
      const old = await g.engine.start({ ...target, trigger: before, input: trigger({}) });
      expect(await g.engine.get(old.id)).not.toHaveProperty('triggerUid');
      // The trigger is deleted and re-created under its name before a worker takes the
      // jobs: its route has another uid (and the newcomer's own workflow would run).
      const now = q.targets.get('shop/orders-hook') as JobTarget;
      const newcomers = workflow([
        { id: 'm', type: 'transform', expression: '{ "newcomer": true }' },
      ]);
      q.targets.set('shop/orders-hook', {
        workflow: newcomers,
        route: { ...now.route, uid: 'uid-2' },
      });
      const done = Promise.all([finished(g.engine, queued.id), finished(g.engine, old.id)]);
      await worker().start();
      const [ran, ranOld] = await done;
      const error = {
        message:
          'endpoint shop/orders-hook was deleted and re-created since this execution was accepted (another WebhookTrigger uid): it is not run under the new trigger',
        statusCode: 500,
        code: 'HG_ERR_TRIGGER_RECREATED',
        kind: 'unrunnable',
      };
      expect(ran).toMatchObject({ status: 'failed', triggerUid: 'uid-1', log: [], error });
      expect(ran).not.toHaveProperty('output');
      expect(ran.finishedAt).toBeDefined();
      const events = await g.store.events(queued.id, 0);
      expect(events.map((e) => e.type)).toEqual(['queued', 'failed']);
      expect(events.at(-1)).toMatchObject({ type: 'failed', error });
      // Without a uid nothing tells the triggers apart: it runs through the route of its name.
      expect(ranOld).toMatchObject({ status: 'succeeded', output: { newcomer: true } });
      expect(ranOld).not.toHaveProperty('triggerUid');
    });

    it("a job of the newcomer itself is run when the worker's cached route still has the old uid: the route is read again before the job is failed", async () => {
      // The gateway took the request under the re-created trigger (uid-2) before this
      // worker heard of the change: its cached route still says uid-1. That job is no run
      // of a re-created trigger, and must not fail as one.
      const target = deploy([{ id: 'n', type: 'transform', expression: '{ "ran": true }' }]);
      const now = q.targets.get('shop/orders-hook') as JobTarget;
      const fresh: JobTarget = { ...now, route: { ...now.route, uid: 'uid-2' } };
      const g = gateway();
      const queued = await g.engine.start({
        ...target,
        trigger: { ...target.trigger, uid: 'uid-2' },
        input: trigger({}),
      });
      const reads: boolean[] = [];
      const done = finished(g.engine, queued.id);
      await worker({
        resolve: (_job, uncached) => {
          reads.push(uncached === true);
          return Promise.resolve(uncached ? fresh : now);
        },
      }).start();
      expect(await done).toMatchObject({
        status: 'succeeded',
        triggerUid: 'uid-2',
        output: { ran: true },
      });
      expect(reads).toEqual([false, true]);
    });

    it('start answers with the queued record at once; a worker runs it; any gateway reads it', async () => {
      const target = deploy([
        { id: 'double', type: 'transform', expression: '{ "total": body.total * 2 }' },
      ]);
      const g = gateway();
      const queued = await g.engine.start({ ...target, input: trigger({ total: 21 }) });
      expect(queued.status).toBe('queued');
      expect(queued.input.metadata.executionId).toBe(queued.id);
      expect((await g.engine.get(queued.id))?.status).toBe('queued');
      await worker().start();
      const done = await finished(g.engine, queued.id);
      expect(done.status).toBe('succeeded');
      expect(done.output).toEqual({ total: 42 });
      expect(done.log.map((l) => [l.nodeId, l.status])).toEqual([['double', 'succeeded']]);
      // Another gateway (its own connections) sees the same record.
      const other = gateway();
      expect((await other.engine.get(queued.id))?.output).toEqual({ total: 42 });
      expect(
        (await other.engine.list({ triggerKey: 'shop/orders-hook' })).map((e) => e.id),
      ).toEqual([queued.id]);
    });

    it('relays events live and to late subscribers, in order, numbered like the in-process engine', async () => {
      const target = deploy([
        { id: 'a', type: 'transform', expression: '{ "v": 1 }' },
        { id: 'r', type: 'respond', statusCode: 201 },
        { id: 'b', type: 'transform', expression: '{ "v": 2 }' },
      ]);
      const g = gateway();
      const queued = await g.engine.start({ ...target, input: trigger({}) });
      const live: SequencedEvent[] = [];
      g.engine.subscribe(queued.id, 0, (e) => live.push(e));
      await worker().start();
      await eventually(() => expect(live.at(-1)?.type).toBe('completed'));
      expect(live.map((e) => e.seq)).toEqual(live.map((_, i) => i + 1));
      expect(live.map((e) => e.type)).toEqual([
        'queued',
        'node.started',
        'node.finished',
        'node.started',
        'respond',
        'node.finished',
        'node.started',
        'node.finished',
        'completed',
      ]);
      expect(live.find((e) => e.type === 'respond')).toMatchObject({
        response: { statusCode: 201, body: { v: 1 } },
      });
      // A late subscriber after seq 3 gets the rest; the relay holds no listener afterwards.
      const late: SequencedEvent[] = [];
      g.engine.subscribe(queued.id, 3, (e) => late.push(e));
      await eventually(() => expect(late.at(-1)?.type).toBe('completed'));
      expect(late.map((e) => e.seq)).toEqual([4, 5, 6, 7, 8, 9]);
      expect(g.events.listenerCount).toBe(0);
    });

    it('relays a batch message (an array of events) in order, and reports a malformed message without losing the stream', async () => {
      const target = deploy([{ id: 'a', type: 'transform', expression: '1' }]);
      const g = gateway();
      const queued = await g.engine.start({ ...target, input: trigger({}) });
      const live: SequencedEvent[] = [];
      const errors = vi.spyOn(console, 'error').mockImplementation(() => {});
      try {
        g.engine.subscribe(queued.id, 0, (e) => live.push(e));
        // The history (the queued event) comes after the subscription: it is live now.
        await eventually(() => expect(live.map((e) => e.seq)).toEqual([1]));
        const channel = q.layout.of(queued.id).channel(queued.id);
        const event = (seq: number, type: string) => ({
          type,
          executionId: queued.id,
          seq,
          at: new Date().toISOString(),
        });
        const publisher = client();
        await publisher.spublish(channel, 'not json');
        await publisher.spublish(channel, JSON.stringify({ seq: 'two', type: 'node.started' }));
        await publisher.spublish(channel, JSON.stringify([null, 7]));
        await publisher.spublish(
          channel,
          JSON.stringify([
            event(2, 'node.started'),
            event(3, 'node.finished'),
            event(2, 'node.started'),
          ]),
        );
        // Sharded pub/sub, as the store's writes publish (execution-events-redis.ts).
        // The terminal event is sent once the others are in.
        // The bad JSON, the event without a numeric seq and the two array items that
        // are no events: each reported, none delivered.
        await eventually(() => {
          expect(live.map((e) => e.seq)).toEqual([1, 2, 3]);
          expect(errors).toHaveBeenCalledTimes(4);
        });
        await publisher.spublish(channel, JSON.stringify(event(4, 'completed')));
        await eventually(() => expect(live.at(-1)?.type).toBe('completed'));
        expect(live.map((e) => [e.seq, e.type])).toEqual([
          [1, 'queued'],
          [2, 'node.started'],
          [3, 'node.finished'],
          [4, 'completed'],
        ]);
        expect(g.events.listenerCount).toBe(0);
      } finally {
        errors.mockRestore();
      }
    });

    it('a subscriber that arrives mid-run misses nothing and sees nothing twice', async () => {
      const target = deploy([
        { id: 'a', type: 'transform', expression: '1' },
        { id: 'wait', type: 'delay', duration: '300ms' },
        { id: 'b', type: 'transform', expression: '2' },
      ]);
      const g = gateway();
      await worker().start();
      const queued = await g.engine.start({ ...target, input: trigger({}) });
      await eventually(async () =>
        expect((await g.engine.get(queued.id))?.log.map((l) => l.nodeId)).toContain('wait'),
      );
      const seen: SequencedEvent[] = [];
      g.engine.subscribe(queued.id, 0, (e) => seen.push(e));
      await eventually(() => expect(seen.at(-1)?.type).toBe('completed'));
      expect(seen.map((e) => e.seq)).toEqual(seen.map((_, i) => i + 1));
    });

    it('two workers share the queue: every execution runs exactly once', async () => {
      const target = deploy([{ id: 'a', type: 'transform', expression: 'body.n' }]);
      const g = gateway();
      await worker({ consumer: 'w1', concurrency: 4 }).start();
      await worker({ consumer: 'w2', concurrency: 4 }).start();
      const ids = await Promise.all(
        Array.from({ length: 40 }, (_v, n) =>
          g.engine.start({ ...target, input: trigger({ n }) }).then((e) => e.id),
        ),
      );
      const done = await Promise.all(ids.map((id) => finished(g.engine, id)));
      expect(done.map((e) => e.output)).toEqual(Array.from({ length: 40 }, (_v, n) => n));
      for (const e of done) expect(e.log).toHaveLength(1);
      // Each ran once: one started/finished pair per execution, and the queue is empty.
      for (const id of ids) {
        const events = await g.store.events(id, 0);
        expect(events.filter((e) => e.type === 'node.started')).toHaveLength(1);
      }
      const redis = client();
      await eventually(async () => expect(await depth(redis)).toBe(0));
      for (const stream of q.layout.streams)
        expect(await redis.xpending(stream, WORKER_GROUP)).toEqual([0, null, null, null]);
      // The ids spread, so the workers read more than one shard's stream.
      if (shards > 1)
        expect(new Set(ids.map((id) => q.layout.shardOf(id))).size).toBeGreaterThan(1);
    });

    it('a job abandoned by a dead worker is run again by another, under the same id (G14)', async () => {
      const target = deploy([{ id: 'a', type: 'transform', expression: '{ "ok": true }' }]);
      const g = gateway();
      const queued = await g.engine.start({ ...target, input: trigger({}) });
      // A worker that read the job and died: the entry is pending for consumer "dead".
      const redis = client();
      const stream = q.layout.of(queued.id).stream;
      await redis.xgroup('CREATE', stream, WORKER_GROUP, '0', 'MKSTREAM');
      await redis.xreadgroup('GROUP', WORKER_GROUP, 'dead', 'COUNT', 1, 'STREAMS', stream, '>');
      await worker({ consumer: 'alive', claimIdleMs: 300 }).start();
      const done = await finished(g.engine, queued.id);
      expect(done.id).toBe(queued.id);
      expect(done.status).toBe('succeeded');
      await eventually(async () => expect(await depth(redis)).toBe(0));
      expect(await g.engine.list({})).toHaveLength(1);
    });

    it('a redelivered job whose execution already finished is acknowledged, not run again', async () => {
      const target = deploy([{ id: 'a', type: 'transform', expression: '1' }]);
      const g = gateway();
      const queued = await g.engine.start({ ...target, input: trigger({}) });
      const w = worker({ consumer: 'w1' });
      await w.start();
      await finished(g.engine, queued.id);
      const eventsBefore = await g.store.events(queued.id, 0);
      // The same job again (as if the first worker died between saving and XACK).
      const redis = client();
      await redis.xadd(
        q.layout.of(queued.id).stream,
        '*',
        'job',
        JSON.stringify({ id: queued.id, triggerKey: 'shop/orders-hook', workflowId: 'x' }),
      );
      await eventually(async () => expect(await depth(redis)).toBe(0));
      expect(await g.store.events(queued.id, 0)).toEqual(eventsBefore);
    });

    it('a job whose execution has no record (expired, or queued under the old key layout) is said and dropped', async () => {
      deploy([{ id: 'a', type: 'transform', expression: '1' }]);
      const redis = client();
      const [id] = sameShard('legacy', 1) as [string];
      // What a gateway of the string-and-list layout wrote (docs/redis-layout.md, "Upgrading").
      const shard = q.layout.of(id);
      await redis.set(`${shard.executionPrefix.replace(/execution:$/, 'exec:')}${id}`, '{}');
      await redis.xadd(
        shard.stream,
        '*',
        'job',
        JSON.stringify({ id, triggerKey: 'shop/orders-hook', workflowId: 'x' }),
      );
      const said: string[] = [];
      await worker({ onInternalError: (e: unknown) => said.push(String(e)) }).start();
      await eventually(async () => expect(await depth(redis)).toBe(0));
      expect(said).toEqual([expect.stringContaining(`execution ${id} has no record`)]);
      expect(said[0]).toContain('docs/redis-layout.md');
    });

    it('an endpoint removed before its job ran fails the execution with a clear message', async () => {
      const target = deploy([{ id: 'a', type: 'transform', expression: '1' }]);
      const g = gateway();
      const queued = await g.engine.start({ ...target, input: trigger({}) });
      q.targets.clear();
      await worker().start();
      const done = await finished(g.engine, queued.id);
      expect(done.status).toBe('failed');
      expect(done.error).toMatchObject({
        code: 'HG_ERR_EXECUTION_FAILED',
        message:
          'endpoint shop/orders-hook or its workflow shop_development_orders is no longer published',
      });
    });

    it('refuses with HG_ERR_ENGINE_OVERLOADED and Retry-After when the queue is full', async () => {
      const target = deploy([{ id: 'a', type: 'transform', expression: '1' }]);
      const g = gateway({ maxQueued: 2 });
      // In two shards: each shard's stream holds 2 / N jobs (rounded up) at most.
      const [a, b] = spread('exec_full_', 2) as [string, string];
      await g.engine.start({ ...target, input: trigger({}, a) });
      await g.engine.start({ ...target, input: trigger({}, b) });
      const refused = await g.engine
        .start({ ...target, input: trigger({}) })
        .catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(HttpProblem);
      expect((refused as HttpProblem).code).toBe('HG_ERR_ENGINE_OVERLOADED');
      // Nothing drains (no worker): the longest advice.
      expect((refused as HttpProblem).headers).toMatchObject({ 'retry-after': '60' });
      expect(await depth(client())).toBe(2);
    });

    it('a full queue still answers an id already queued with its record', async () => {
      const target = deploy([{ id: 'a', type: 'transform', expression: '1' }]);
      // Two jobs a shard at most; the three ids below fall in one shard.
      const bound = 2 * shards;
      const [knownId, otherId, newId] = sameShard('exec_known_', 3) as [string, string, string];
      const stale = gateway({ maxQueued: bound, depthEveryMs: 600_000 });
      await stale.engine.refresh();
      const g = gateway({ maxQueued: bound });
      const known = await g.engine.start({ ...target, input: trigger({}, knownId) });
      await g.engine.start({ ...target, input: trigger({}, otherId) });
      // `stale` read depth 0 before: the script finds the shard full, and the id taken.
      const again = await stale.engine.start({ ...target, input: trigger({ x: 1 }, knownId) });
      expect(again.id).toBe(known.id);
      expect(again.input.body).toEqual({});
      const refused = await stale.engine
        .start({ ...target, input: trigger({}, newId) })
        .catch((e: unknown) => e);
      expect((refused as HttpProblem).code).toBe('HG_ERR_ENGINE_OVERLOADED');
      expect(await g.store.get(newId)).toBeUndefined();
      expect(await depth(client())).toBe(2);
    });

    it('gateways racing with a stale depth never pass the bound: the enqueue script checks it', async () => {
      const target = deploy([{ id: 'a', type: 'transform', expression: '1' }]);
      // Depth read once at start (0), never again during the burst.
      const gateways = [
        gateway({ maxQueued: 7, depthEveryMs: 600_000 }),
        gateway({ maxQueued: 7, depthEveryMs: 600_000 }),
        gateway({ maxQueued: 7, depthEveryMs: 600_000 }),
      ];
      for (const g of gateways) await g.engine.refresh();
      // Each shard's stream holds 7 / N (rounded up): what the ids below can fill.
      const ids = Array.from({ length: 60 }, (_v, i) => `exec_race_${i}`);
      const perShard = new Map<number, number>();
      for (const id of ids)
        perShard.set(q.layout.shardOf(id), (perShard.get(q.layout.shardOf(id)) ?? 0) + 1);
      const fits = [...perShard.values()].reduce(
        (n, c) => n + Math.min(c, Math.ceil(7 / shards)),
        0,
      );
      if (shards === 1) expect(fits).toBe(7);
      else expect(fits).toBeLessThanOrEqual(7 + shards - 1);
      const outcomes = await Promise.all(
        ids.map((id, i) =>
          (gateways[i % 3] as (typeof gateways)[number]).engine
            .start({ ...target, input: trigger({ i }, id) })
            .then(
              () => 'queued',
              (e: unknown) => (e instanceof HttpProblem ? e.code : String(e)),
            ),
        ),
      );
      expect(outcomes.filter((o) => o === 'queued')).toHaveLength(fits);
      expect(outcomes.filter((o) => o === 'HG_ERR_ENGINE_OVERLOADED')).toHaveLength(60 - fits);
      expect(await depth(client())).toBe(fits);
      for (const stream of q.layout.streams)
        expect(await client().xlen(stream)).toBeLessThanOrEqual(Math.ceil(7 / shards));
      // Each refused at Redis: its gateway now knows the queue is full, without a read.
      for (const g of gateways) expect(g.engine.queued).toBeGreaterThanOrEqual(7);
    });

    it('reads depth and the oldest age as they grow, the drain rate as workers catch up, then an empty queue', async () => {
      const target = deploy([{ id: 'a', type: 'transform', expression: '1' }]);
      // A bound above what is queued: the depth last read may be over the true one.
      const g = gateway({ maxQueued: 12, depthEveryMs: 100 });
      const streams = q.layout.streams;
      expect(await readQueueState(client(), streams)).toMatchObject({
        depth: 0,
        oldestAgeSeconds: 0,
      });
      // In five shards (each holds 12 / N jobs at most, rounded up).
      const ids = spread('exec_age_', 5);
      for (let i = 0; i < 5; i++)
        await g.engine.start({ ...target, input: trigger({ i }, ids[i]) });
      const first = await readQueueState(client(), streams);
      expect(first.depth).toBe(5);
      await sleep(300);
      const later = await readQueueState(client(), streams);
      expect(later.depth).toBe(5);
      expect(later.oldestAgeSeconds).toBeGreaterThanOrEqual(0.3);
      expect(later.oldestAgeSeconds).toBeGreaterThan(first.oldestAgeSeconds);
      await eventually(() => {
        expect(g.engine.queued).toBe(5);
        expect(g.engine.oldestAgeSeconds).toBeGreaterThan(0);
      });
      await worker().start();
      await eventually(async () => {
        expect(await readQueueState(client(), streams)).toMatchObject({
          depth: 0,
          oldestAgeSeconds: 0,
          removed: 5,
        });
      });
      // The gateway saw the five drain: a rate.
      await eventually(() => {
        expect(g.engine.queued).toBe(0);
        expect(g.engine.oldestAgeSeconds).toBe(0);
        expect(g.engine.drainPerSecond).toBeGreaterThan(0);
      });
    });

    it('while workers drain a full queue, a refusal advises the time to free room at their pace, not the longest', async () => {
      // One worker, one job at a time, 150 ms each: about 6 jobs per second at best.
      const target = deploy([{ id: 'wait', type: 'delay', duration: '150ms' }]);
      const g = gateway({ maxQueued: 4, depthEveryMs: 100 });
      await worker({ concurrency: 1 }).start();
      const advised: number[] = [];
      // Keep the queue full: every refusal is recorded, every acceptance refills it.
      // (Measured here: 60 while the pace is not known yet, then 1.)
      await eventually(
        async () => {
          const outcome = await g.engine.start({ ...target, input: trigger({}) }).then(
            () => undefined,
            (e: unknown) => e,
          );
          if (outcome instanceof HttpProblem) {
            expect(outcome.code).toBe('HG_ERR_ENGINE_OVERLOADED');
            advised.push(Number(outcome.headers['retry-after']));
          }
          expect(advised.some((s) => s < 60)).toBe(true);
        },
        30_000,
        50,
      );
      // Every advice is whole seconds within 1..60.
      for (const seconds of advised) {
        expect(Number.isInteger(seconds)).toBe(true);
        expect(seconds).toBeGreaterThanOrEqual(1);
        expect(seconds).toBeLessThanOrEqual(60);
      }
      for (const stream of q.layout.streams)
        expect(await client().xlen(stream)).toBeLessThanOrEqual(Math.ceil(4 / shards));
    });

    it('an id given twice queues one execution; only the first start says it created it', async () => {
      const target = deploy([{ id: 'a', type: 'transform', expression: '1' }]);
      const g = gateway();
      const first = await g.engine.start({ ...target, input: trigger({}, 'exec_fixed') });
      const second = await g.engine.start({
        ...target,
        input: trigger({ other: 1 }, 'exec_fixed'),
      });
      expect(second.id).toBe(first.id);
      expect(second.input.body).toEqual({});
      expect(await depth(client())).toBe(1);
      expect(first.created).toBe(true);
      expect(second.created).toBeUndefined();
      // The flag is the answer's, not the record's.
      expect(await g.engine.get(first.id)).not.toHaveProperty('created');
    });

    it('a discarded success that came with an Idempotency-Key leaves a tombstone: its id is not queued again for the window (ADR 0041)', async () => {
      const target: JobTarget = {
        route: route('shop/gone-hook'),
        workflow: workflow([{ id: 'a', type: 'transform', expression: '{ "n": body.n }' }], {
          executionRecords: { succeeded: 'Discard' },
        }),
      };
      q.targets.set('shop/gone-hook', target);
      const plain = { workflow: target.workflow, trigger: triggerRef(target.route) };
      const keyed = { ...plain, idempotencyWindowMs: 60_000 };
      // The key's retry of a request that got no answer: the same id, from the key's hint.
      const retry = { ...keyed, hinted: true as const };
      const g = gateway();
      const redis = client();
      const first = await g.engine.start({ ...keyed, input: trigger({ n: 1 }, 'exec_keyed') });
      // Before it has run (the key's retry of a request that got no answer): the record.
      const again = await g.engine.start({ ...retry, input: trigger({ n: 1 }, 'exec_keyed') });
      expect([again.id, again.status]).toEqual([first.id, 'queued']);
      expect(await depth(redis)).toBe(1);
      await worker().start();
      await eventually(async () => expect(await g.engine.get(first.id)).toBeUndefined());
      const keys = q.layout.of(first.id);
      expect(await redis.exists(keys.execution(first.id))).toBe(0);
      expect(await g.store.discarded(first.id)).toEqual({
        status: 'succeeded',
        finishedAt: expect.any(String),
      });
      const ttl = await redis.pttl(keys.tombstone(first.id));
      expect(ttl).toBeGreaterThan(50_000);
      expect(ttl).toBeLessThanOrEqual(60_000);
      // After: refused, nothing queued, nothing written.
      await expect(
        g.engine.start({ ...retry, input: trigger({ n: 1 }, 'exec_keyed') }),
      ).rejects.toMatchObject({
        code: 'HG_ERR_EXECUTION_DISCARDED',
        status: 410,
        extensions: { executionId: first.id },
      });
      expect(await depth(redis)).toBe(0);
      expect(await redis.exists(keys.execution(first.id))).toBe(0);
      expect(await g.engine.list({ triggerKey: 'shop/gone-hook' })).toEqual([]);
      // One without a key leaves nothing (what it cost before).
      const other = await g.engine.start({ ...plain, input: trigger({ n: 2 }, 'exec_plain') });
      await eventually(async () => expect(await g.engine.get(other.id)).toBeUndefined());
      expect(await g.store.discarded(other.id)).toBeUndefined();
      expect(await redis.exists(q.layout.of(other.id).tombstone(other.id))).toBe(0);
    });

    // A workflow switched Keep -> Discard (or back) while a gateway's cache still has the
    // other setting: a success is discarded only when the gateway's view at the enqueue
    // (the job's discardIfSucceeded) and the worker's at the finish both say Discard (ADR
    // 0041, amended 2026-11-28 (day)). A waiting caller subscribes after the enqueue has
    // answered, and a gateway whose view says Keep does not mark the execution watched.
    describe('a success is discarded only when the gateway and the worker both say Discard', () => {
      const KEY = 'shop/switched-hook';
      const DISCARD = { executionRecords: { succeeded: 'Discard' as const } };
      const quick: Partial<WorkflowNode>[] = [
        { id: 'a', type: 'transform', expression: '{ "n": body.n }' },
      ];
      /** The gateway's view (what it starts with) and the worker's (what it resolves). */
      function views(gateway: 'Keep' | 'Discard', worker: 'Keep' | 'Discard', nodes = quick) {
        const view = (says: 'Keep' | 'Discard') =>
          workflow(nodes, says === 'Discard' ? DISCARD : {});
        const target: JobTarget = { route: route(KEY), workflow: view(worker) };
        q.targets.set(KEY, target);
        return { workflow: view(gateway), trigger: triggerRef(target.route) };
      }
      /** The job JSON of an execution queued and not taken yet. */
      async function jobOf(id: string): Promise<Record<string, unknown>> {
        const entries = await client().xrange(q.layout.of(id).stream, '-', '+');
        const fields = entries.find(([, f]) => f[1]?.includes(`"${id}"`))?.[1] ?? [];
        return JSON.parse(fields[1] ?? '{}') as Record<string, unknown>;
      }
      /** The end of an execution read by a caller who subscribes now, within `ms`. */
      const endOf = (g: ReturnType<typeof gateway>, id: string, ms = 3_000) =>
        Promise.race([
          finished(g.engine, id),
          sleep(ms).then(() => Promise.reject(new Error(`no end of ${id} within ${ms} ms`))),
        ]);

      it('the gateway says Keep (a stale cache), the worker Discard: kept; a caller subscribing after the end reads it', async () => {
        const target = views('Keep', 'Discard');
        const g = gateway();
        // What a waiting mode does with a Keep view: no watched mark.
        const queued = await g.engine.start({ ...target, input: trigger({ n: 3 }) });
        expect(await jobOf(queued.id)).not.toHaveProperty('discardIfSucceeded');
        await worker().start();
        // The run is over before the caller subscribes (the race a waiting mode can lose).
        await eventually(async () => expect(await depth(client())).toBe(0));
        expect(await endOf(g, queued.id)).toMatchObject({ status: 'succeeded', output: { n: 3 } });
        expect(await g.engine.list({ triggerKey: KEY })).toHaveLength(1);
      });

      it('a job without the field (a gateway from before, which marked its waiting modes watched) is kept', async () => {
        // Such a gateway wrote what this one writes for a Keep view marked watched: the
        // hash with `w`, a job of id, trigger and workflow only.
        const target = views('Keep', 'Discard');
        const g = gateway();
        const queued = await g.engine.start({ ...target, watched: true, input: trigger({ n: 4 }) });
        expect(Object.keys(await jobOf(queued.id)).sort()).toEqual([
          'id',
          'triggerKey',
          'workflowId',
        ]);
        const done = finished(g.engine, queued.id);
        await worker().start();
        expect(await done).toMatchObject({ status: 'succeeded', output: { n: 4 } });
        expect((await g.engine.get(queued.id))?.status).toBe('succeeded');
      });

      it('the gateway says Discard, the worker Keep (switched back): kept', async () => {
        const target = views('Discard', 'Keep');
        const g = gateway();
        const queued = await g.engine.start({ ...target, watched: true, input: trigger({ n: 5 }) });
        expect(await jobOf(queued.id)).toMatchObject({ discardIfSucceeded: true });
        const done = finished(g.engine, queued.id);
        await worker().start();
        expect(await done).toMatchObject({ status: 'succeeded', output: { n: 5 } });
        await sleep(50);
        expect((await g.engine.get(queued.id))?.status).toBe('succeeded');
      });

      it('a job whose discardIfSucceeded is neither true nor "responded" (a foreign or damaged entry) is kept, whatever the worker says', async () => {
        const target = views('Discard', 'Discard');
        const g = gateway();
        const redis = client();
        const ids: string[] = [];
        for (const [n, value] of [1, 'true', 'yes', 'RESPONDED', null, false, {}].entries()) {
          const queued = await g.engine.start({ ...target, watched: true, input: trigger({ n }) });
          // The entry as another writer left it: the same job, another value in the field.
          const stream = q.layout.of(queued.id).stream;
          const entries = await redis.xrange(stream, '-', '+');
          const [entryId, fields] = entries.find(([, f]) => f[1]?.includes(`"${queued.id}"`)) ?? [];
          const job = JSON.parse(fields?.[1] ?? '{}') as Record<string, unknown>;
          expect(job.discardIfSucceeded).toBe(true);
          await redis.xdel(stream, entryId ?? '');
          await redis.xadd(
            stream,
            '*',
            'job',
            JSON.stringify({ ...job, discardIfSucceeded: value }),
          );
          ids.push(queued.id);
        }
        const ends = ids.map((id) => finished(g.engine, id));
        await worker().start();
        await Promise.all(ends);
        await eventually(async () => expect(await depth(client())).toBe(0));
        await sleep(50);
        for (const id of ids) expect((await g.engine.get(id))?.status, id).toBe('succeeded');
      });

      it('both say Discard: discarded, and the waiting caller still reads the end', async () => {
        const target = views('Discard', 'Discard');
        const g = gateway();
        const queued = await g.engine.start({ ...target, watched: true, input: trigger({ n: 6 }) });
        const events: SequencedEvent[] = [];
        await worker().start();
        await eventually(async () => expect(await depth(client())).toBe(0));
        g.engine.subscribe(queued.id, 0, (e) => events.push(e));
        await eventually(() =>
          expect(events.at(-1)).toMatchObject({ type: 'completed', output: { n: 6 } }),
        );
        expect(await g.engine.get(queued.id)).toBeUndefined();
      });

      it('Wait for Response Node (respondAwaited): a success without a respond node is kept, one with it is discarded', async () => {
        const respondFirst: Partial<WorkflowNode>[] = [
          { id: 'answer', type: 'respond', statusCode: 201, expression: '{ "ok": true }' },
          ...quick,
        ];
        const g = gateway();
        const awaited = { watched: true as const, respondAwaited: true as const };
        const none = await g.engine.start({
          ...views('Discard', 'Discard'),
          ...awaited,
          input: trigger({ n: 7 }),
        });
        expect(await jobOf(none.id)).toMatchObject({ discardIfSucceeded: 'responded' });
        await worker().start();
        expect(await endOf(g, none.id)).toMatchObject({ status: 'succeeded', output: { n: 7 } });
        const answered = await g.engine.start({
          ...views('Discard', 'Discard', respondFirst),
          ...awaited,
          input: trigger({ n: 8 }),
        });
        const events: SequencedEvent[] = [];
        g.engine.subscribe(answered.id, 0, (e) => events.push(e));
        await eventually(() => expect(events.at(-1)).toMatchObject({ type: 'completed' }));
        expect(events.map((e) => e.type)).toContain('respond');
        expect(await g.engine.get(answered.id)).toBeUndefined();
        expect((await g.engine.get(none.id))?.status).toBe('succeeded');
      });
    });

    it('a worker hands its engine the trigger, never the credentials of the route it read', async () => {
      const target = deploy([{ id: 'a', type: 'transform', expression: '{ "t": $trigger }' }]);
      const material = ['0f'.repeat(32), 'jwt-hmac-secret-0123456789', 'test-token-abcdef'];
      (q.targets.get('shop/orders-hook') as JobTarget).route.credentials = {
        apiKeys: [{ consumer: 'acme', sha256: '0f'.repeat(32) }],
        jwtKey: 'jwt-hmac-secret-0123456789',
        testCredential: 'test-token-abcdef',
      };
      const store = new RedisExecutionStore({ redis: client(), layout: q.layout });
      const engine = new InProcessEngine({ store, streamEvents: true, onInternalError: () => {} });
      const resume = vi.spyOn(engine, 'resume');
      const g = gateway();
      await worker({ engine }).start();
      const queued = await g.engine.start({ ...target, input: trigger({}) });
      const done = await finished(g.engine, queued.id);
      expect(done.status).toBe('succeeded');
      const request = resume.mock.calls[0]?.[0];
      expect(request?.trigger).toEqual(target.trigger);
      expect(credentialLeaks(request, material)).toEqual([]);
      expect(credentialLeaks(done, material)).toEqual([]);
      expect(credentialLeaks(await g.store.events(queued.id, 0), material)).toEqual([]);
    });

    it('close() lets running executions finish and acknowledges them', async () => {
      const target = deploy([{ id: 'wait', type: 'delay', duration: '300ms' }]);
      const g = gateway();
      const w = worker();
      await w.start();
      const queued = await g.engine.start({ ...target, input: trigger({}) });
      await eventually(() => expect(w.running).toBe(1));
      await w.close(5_000);
      expect((await g.engine.get(queued.id))?.status).toBe('succeeded');
      expect(await depth(client())).toBe(0);
    });

    it('a stopped worker leaves the consumer group, unless it still holds a pending job', async () => {
      const target = deploy([{ id: 'a', type: 'transform', expression: '{ "ok": true }' }]);
      const g = gateway();
      const redis = client();
      const consumers = () => consumersOf(redis);
      // Each restart, rollout or scale-down stops a worker and starts one with a new name.
      for (const consumer of ['first', 'second', 'third']) {
        const w = worker({ consumer });
        await w.start();
        const queued = await g.engine.start({ ...target, input: trigger({}) });
        expect((await finished(g.engine, queued.id)).status).toBe('succeeded');
        expect(Object.keys(await consumers())).toContain(consumer);
        await w.close(2_000);
      }
      expect(await consumers()).toEqual({});
      // A worker that read a job and did not finish it: its name stays with the job.
      const queued = await g.engine.start({ ...target, input: trigger({}) });
      const stream = q.layout.of(queued.id).stream;
      await redis.xreadgroup('GROUP', WORKER_GROUP, 'holder', 'COUNT', 1, 'STREAMS', stream, '>');
      const holder = worker({ consumer: 'holder' });
      await holder.start();
      await holder.close(2_000);
      expect(await consumers()).toEqual({ holder: 1 });
      // Another worker claims it (XAUTOCLAIM) and runs it.
      await worker({ consumer: 'claimer', claimIdleMs: 300 }).start();
      expect((await finished(g.engine, queued.id)).status).toBe('succeeded');
    });

    it('the name of a worker killed without close() goes once it holds no job and has been idle', async () => {
      const target = deploy([{ id: 'a', type: 'transform', expression: '{ "ok": true }' }]);
      const g = gateway();
      const redis = client();
      const consumers = () => consumersOf(redis);
      const [first, second] = await Promise.all([
        g.engine.start({ ...target, input: trigger({}) }),
        g.engine.start({ ...target, input: trigger({}) }),
      ]);
      const read = async (consumer: string, id: string) => {
        const stream = q.layout.of(id).stream;
        await redis.xgroup('CREATE', stream, WORKER_GROUP, '0', 'MKSTREAM').catch(() => {});
        const reply = (await redis.xreadgroup(
          'GROUP',
          WORKER_GROUP,
          consumer,
          'COUNT',
          1,
          'STREAMS',
          stream,
          '>',
        )) as [string, [string, string[]][]][];
        const entry = reply[0]?.[1][0]?.[0];
        if (entry === undefined) throw new Error(`no job for ${consumer} on ${stream}`);
        return { stream, entry };
      };
      // Killed after finishing its job ("gone"), and killed holding one ("holder").
      const done = await read('gone', first.id);
      await redis.xack(done.stream, WORKER_GROUP, done.entry);
      await read('holder', second.id);
      expect(await consumers()).toEqual({ gone: 0, holder: 1 });
      await sleep(400);
      // A live worker that claims nothing yet: only the name without a job goes.
      await worker({ consumer: 'alive', claimIdleMs: 60_000, forgetIdleMs: 300 }).start();
      await eventually(async () => expect(Object.keys(await consumers())).not.toContain('gone'));
      expect(await consumers()).toMatchObject({ holder: 1 });
      // Its job claimed and run by another worker, the holder's name goes too.
      await worker({ consumer: 'claimer', claimIdleMs: 300, forgetIdleMs: 300 }).start();
      expect((await finished(g.engine, second.id)).status).toBe('succeeded');
      await eventually(async () => expect(Object.keys(await consumers())).not.toContain('holder'));
    });
  });
