// Execution retries through the Redis queue (distributed mode), with a real
// redis-server (one shard) and a real Redis Cluster of three masters (six shards):
// attempts handed to the retry set and moved back to the stream when due (each once,
// whichever worker sees it), dead letters in Redis, stale jobs dropped, and a worker
// process killed with SIGKILL mid-backoff and mid-attempt losing nothing.
import { spawn, type ChildProcess } from 'node:child_process';
import { join, resolve } from 'node:path';
import type { RedisClient } from '../../api/records/redis-client.ts';
import { afterEach, describe, expect, it } from 'vitest';
import { expectLifetimeFromDeadLettering } from './dead-letter-lifetime.ts';
import type { RetryPolicy, WorkflowNode } from '../../api/v1alpha1/workflow.ts';
import type { RouteRecord, WorkflowRegistration } from '../../api/records/records.ts';
import { REDIS_KEYS, RedisRecordStore } from '../../api/records/redis-store.ts';
import { MemoryRecordStore } from '../../api/records/memory-store.ts';
import { createHttpApp } from '../../runtime/http-app.ts';
import { recoveryRoutes } from '../../runtime/read-api/recovery-routes.ts';
import { executionRoutes } from '../../runtime/read-api/execution-routes.ts';
import type { DeadLetter } from '../../runtime/engine/dead-letters.ts';
import { RedisDeadLetterStore } from '../../runtime/engine/dead-letters-redis.ts';
import { FINISHED_GRACE_MS } from '../../runtime/engine/execution-store.ts';
import { RedisExecutionStore } from '../../runtime/engine/execution-store-redis.ts';
import type { Execution, SequencedEvent } from '../../runtime/engine/ports.ts';
import { RedisRetryQueue } from '../../runtime/engine/retry-queue-redis.ts';
import { triggerRef } from '../../runtime/engine/trigger-ref.ts';
import type { JobTarget } from '../../runtime/engine/worker.ts';
import { eventually, sleep } from '../support/eventually.ts';
import { freePort } from '../support/ports.ts';
import { redisAvailable } from '../support/redis.ts';
import { redisCluster, singleRedis } from '../support/redis-backends.ts';
import { deadLetteredExecution, route, trigger, workflow } from './helpers.ts';
import { redisQueueHarness } from './queue-harness.ts';

const root = resolve(import.meta.dirname, '..', '..');
const KEY = 'shop/orders-hook';

/**
 * Fails (a fail node) while the clock is before body.failUntil (ms), then succeeds:
 * a failure that goes away, without any outbound call.
 */
const flaky: Partial<WorkflowNode>[] = [
  { id: 'check', type: 'if', condition: '$millis() < $trigger.body.failUntil', else: 'ok' },
  { id: 'stop', type: 'fail', expression: '"not yet"', statusCode: 503 },
  { id: 'ok', type: 'transform', expression: '{ "done": $trigger.body.n }' },
];
const onFail = (attempts: number, initial: string, extra: Partial<RetryPolicy> = {}) =>
  ({
    attempts,
    backoff: { initial, max: '10s', multiplier: 1, jitter: 0 },
    on: ['fail'],
    ...extra,
  }) as RetryPolicy;

for (const [name, start, shards] of [
  ['one Redis', singleRedis, 1],
  ['a Redis Cluster of 3 masters, 6 shards', redisCluster, 6],
] as const)
  describe.skipIf(!redisAvailable())(`execution retries through the Redis queue on ${name}`, () => {
    const q = redisQueueHarness(start, shards);
    const { client, depth, gateway } = q;
    const worker = () => q.worker({ retries: true });
    /** Attempts waiting in every shard's retry set. */
    const due = async (redis: RedisClient) => {
      let n = 0;
      for (const shard of q.layout.shards) n += await redis.zcard(shard.retries);
      return n;
    };

    function deploy(nodes: Partial<WorkflowNode>[], retry: RetryPolicy) {
      const target: JobTarget = { route: route(KEY), workflow: workflow(nodes, { retry }) };
      q.targets.set(KEY, target);
      return { workflow: target.workflow, trigger: triggerRef(target.route) };
    }

    /**
     * The admin API's recovery routes (and with `reads` its execution reads) over the
     * gateway `g`, the deployed route in a route store of their own.
     */
    async function adminApp(g: ReturnType<typeof gateway>, { reads = false } = {}) {
      const routes = new MemoryRecordStore<RouteRecord>();
      const current = q.targets.get(KEY) as JobTarget;
      await routes.put(KEY, current.route);
      const { app } = createHttpApp({});
      if (reads) executionRoutes(app, { engine: g.engine });
      recoveryRoutes(app, {
        engine: g.engine,
        routes,
        workflow: (id) => (id === current.workflow.workflowId ? current.workflow : undefined),
        deadLetters: g.deadLetters,
      });
      q.closeAfter(() => app.close());
      return { app, routes, current };
    }

    /** Waits until the execution is finished, reading the shared store. */
    const settled = (g: ReturnType<typeof gateway>, id: string, timeoutMs = 15_000) =>
      eventually(
        async () => {
          const e = await g.engine.get(id);
          expect(['succeeded', 'failed']).toContain(e?.status);
          return e as Execution;
        },
        timeoutMs,
        50,
      );

    it('a failed attempt waits in the retry set, comes back through the stream and succeeds', async () => {
      const target = deploy(flaky, onFail(6, '300ms'));
      const g = gateway();
      // Workers first, so the first attempt runs well within the second that fails
      // (on a loaded machine, starting them after the enqueue took longer than that).
      await worker().start();
      await worker().start();
      const queued = await g.engine.start({
        ...target,
        input: trigger({ n: 5, failUntil: Date.now() + 1_000 }),
      });
      const live: SequencedEvent[] = [];
      g.engine.subscribe(queued.id, 0, (e) => live.push(e));
      const done = await settled(g, queued.id);
      expect(done).toMatchObject({ status: 'succeeded', output: { done: 5 } });
      expect(done.attempt).toBeGreaterThanOrEqual(2);
      const failedAttempts = done.failedAttempts ?? [];
      expect(failedAttempts.map((a) => a.attempt)).toEqual(
        Array.from({ length: (done.attempt ?? 1) - 1 }, (_, i) => i + 1),
      );
      expect(failedAttempts[0]?.error).toMatchObject({ kind: 'fail', statusCode: 503 });
      // Every attempt's node runs are in the log, marked with their attempt.
      const attemptsLogged = [...new Set(done.log.map((l) => l.attempt))];
      expect(attemptsLogged).toEqual(Array.from({ length: done.attempt ?? 1 }, (_, i) => i + 1));
      await eventually(() => expect(live.at(-1)?.type).toBe('completed'));
      expect(live.map((e) => e.seq)).toEqual(live.map((_, i) => i + 1));
      expect(live.filter((e) => e.type === 'attempt.failed')).toHaveLength(failedAttempts.length);
      expect(live.filter((e) => e.type === 'attempt.started')).toHaveLength(failedAttempts.length);
      // Nothing left behind: no job in the stream or the retry set, no dead letter.
      await eventually(async () => expect(await depth(client())).toBe(0));
      expect(await due(client())).toBe(0);
      expect(await g.deadLetters.count()).toBe(0);
    });

    /** The flaky workflow under a retry policy and Discard, a gateway, a started worker. */
    async function discardingRetried() {
      const target: JobTarget = {
        route: route(KEY),
        workflow: workflow(flaky, {
          retry: onFail(6, '300ms'),
          executionRecords: { succeeded: 'Discard' },
        }),
      };
      q.targets.set(KEY, target);
      const g = gateway();
      await worker().start();
      return { target, g };
    }

    it('Discard: the final success of a retried execution removes it, its failed attempts with it (ADR 0041)', async () => {
      const { target, g } = await discardingRetried();
      const queued = await g.engine.start({
        workflow: target.workflow,
        trigger: triggerRef(target.route),
        input: trigger({ n: 5, failUntil: Date.now() + 1_000 }),
      });
      const live: SequencedEvent[] = [];
      g.engine.subscribe(queued.id, 0, (e) => live.push(e));
      await eventually(() => expect(live.at(-1)?.type).toBe('completed'), 15_000);
      expect(live.at(-1)).toMatchObject({ output: { done: 5 } });
      expect(live.filter((e) => e.type === 'attempt.failed').length).toBeGreaterThan(0);
      expect(await g.engine.get(queued.id)).toBeUndefined();
      expect(await g.engine.list({})).toEqual([]);
      // Watched (this subscription): its events lasted the handover time, then nothing.
      const key = q.layout.of(queued.id).execution(queued.id);
      await eventually(async () => expect(await client().exists(key)).toBe(0), 10_000);
      await eventually(async () => expect(await depth(client())).toBe(0));
      expect(await due(client())).toBe(0);
      expect(await g.deadLetters.count()).toBe(0);
    });

    it("the retry queue carries what the views of the workflow said of a success into the next attempt's job (ADR 0041, amended 2026-11-28 (day))", async () => {
      const g = gateway();
      const retries = new RedisRetryQueue({ redis: client(), store: g.store });
      const discarding = workflow(flaky, { executionRecords: { succeeded: 'Discard' } });
      const jobs: Record<string, unknown>[] = [];
      for (const [id, request] of [
        ['exec_d', {}],
        ['exec_r', { respondAwaited: true as const }],
        // Queued under Keep (the job said nothing) or run by a worker whose view says Keep.
        ['exec_k', { keepRecord: true as const }],
        ['exec_w', { workflow: workflow(flaky) }],
      ] as const) {
        const execution: Execution = {
          id,
          workflowId: discarding.workflowId,
          triggerKey: KEY,
          status: 'queued',
          createdAt: new Date().toISOString(),
          input: trigger({}, id),
          log: [],
        };
        const start = {
          workflow: discarding,
          trigger: triggerRef(route(KEY)),
          input: execution.input,
        };
        await retries.schedule(execution, { ...start, ...request }, Date.now() + 60_000);
        const [job] = await client().zrange(q.layout.of(id).retries, '0', '-1');
        jobs.push(JSON.parse(job ?? '{}') as Record<string, unknown>);
        await client().del(q.layout.of(id).retries);
      }
      expect(jobs.map((j) => [j.id, j.discardIfSucceeded])).toEqual([
        ['exec_d', true],
        ['exec_r', 'responded'],
        ['exec_k', undefined],
        ['exec_w', undefined],
      ]);
    });

    it('Discard with an Idempotency-Key: the retry queue carries its window, so the final success leaves its tombstone (ADR 0041)', async () => {
      const { target, g } = await discardingRetried();
      const request = {
        workflow: target.workflow,
        trigger: triggerRef(target.route),
        input: trigger({ n: 6, failUntil: Date.now() + 1_000 }, 'exec_keyed_retried'),
        idempotencyWindowMs: 60_000,
      };
      const queued = await g.engine.start(request);
      await eventually(
        async () => expect(await g.store.discarded(queued.id)).toBeDefined(),
        15_000,
      );
      expect(await g.engine.get(queued.id)).toBeUndefined();
      expect(await client().pttl(q.layout.of(queued.id).tombstone(queued.id))).toBeGreaterThan(
        50_000,
      );
      // The key's retry resuming its id runs nothing.
      await expect(g.engine.start({ ...request, hinted: true })).rejects.toMatchObject({
        code: 'HG_ERR_EXECUTION_DISCARDED',
      });
      await eventually(async () => expect(await depth(client())).toBe(0));
      expect(await due(client())).toBe(0);
    });

    it('an execution that waits for its next attempt past its lifetime keeps its record and runs it', async () => {
      q.storeTtlMs = 1_000;
      const target = deploy(flaky, onFail(2, '1500ms'));
      const g = gateway();
      await worker().start();
      const queued = await g.engine.start({
        ...target,
        input: trigger({ n: 7, failUntil: Date.now() + 1_200 }),
      });
      const key = q.layout.of(queued.id).execution(queued.id);
      const redis = client();
      // The first attempt failed: the execution waits in the retry set, without expiry.
      await eventually(async () => expect(await due(redis)).toBe(1));
      expect(await redis.pttl(key)).toBe(-1);
      const done = await settled(g, queued.id);
      expect(done).toMatchObject({ status: 'succeeded', attempt: 2, output: { done: 7 } });
    });

    it('exhausted: the execution is dead-lettered once in Redis, with its attempts', async () => {
      const target = deploy(flaky, onFail(3, '50ms'));
      const g = gateway();
      const queued = await g.engine.start({
        ...target,
        input: trigger({ n: 1, failUntil: Date.now() + 3_600_000 }),
        callbackUrl: 'https://receiver.test/hook',
      });
      await worker().start();
      const done = await settled(g, queued.id);
      expect(done).toMatchObject({ status: 'failed', attempt: 3, error: { kind: 'fail' } });
      expect(done.deadLetteredAt).toBeDefined();
      await eventually(async () => expect(await g.deadLetters.count()).toBe(1));
      expect(await g.deadLetters.get(queued.id)).toMatchObject({
        executionId: queued.id,
        triggerKey: KEY,
        namespace: 'shop',
        attempts: 3,
        callbackUrl: 'https://receiver.test/hook',
      });
      const events = await g.store.events(queued.id, 0);
      expect(events.at(-1)).toMatchObject({ type: 'failed', deadLettered: true });
      expect(events.filter((e) => e.type === 'attempt.failed')).toHaveLength(2);
    });

    it('a job taken again whose record says dead-lettered lists its entry; one whose record went first is said', async () => {
      const g = gateway();
      const redis = client();
      for (const id of ['kept', 'gone']) {
        const record = deadLetteredExecution(id);
        await g.store.save({ ...record, status: 'running' });
        await g.store.save(record);
        // Its worker died after the record, before the entry and the acknowledgement.
        const job = JSON.stringify({ id, triggerKey: KEY, workflowId: record.workflowId });
        await redis.xadd(q.layout.of(id).stream, '*', 'job', job);
      }
      // The record of 'gone' goes (expired, or dropped) between the read and the add.
      const deadLetters = new Proxy(g.deadLetters, {
        get(list, name) {
          if (name === 'add')
            return async (entry: DeadLetter) => {
              if (entry.executionId === 'gone')
                await redis.del(q.layout.of('gone').execution('gone'));
              return list.add(entry);
            };
          const value: unknown = Reflect.get(list, name);
          return typeof value === 'function' ? (value as () => unknown).bind(list) : value;
        },
      });
      const said: string[] = [];
      const onInternalError = (error: unknown) => said.push(String(error));
      await q.worker({ retries: true, deadLetters, onInternalError }).start();
      await eventually(async () => expect(await depth(redis)).toBe(0));
      expect(await g.deadLetters.get('kept')).toBeDefined();
      expect(await g.deadLetters.get('gone')).toBeUndefined();
      expect(said).toEqual([
        expect.stringContaining(
          'execution gone is not in the dead-letter list: its record is gone',
        ),
      ]);
    });

    it('dead-lettered after its lifetime: readable, with its events, listed and retryable while its entry is listed', async () => {
      // Two attempts 2.5 s apart, a lifetime of 2 s (dead letters too, as the roles
      // make them): the execution is dead-lettered after its lifetime from creation.
      q.storeTtlMs = 2_000;
      const target = deploy(flaky, onFail(2, '2500ms'));
      const g = gateway();
      const { app } = await adminApp(g, { reads: true });
      await worker().start();
      const queued = await g.engine.start({
        ...target,
        input: trigger({ n: 3, failUntil: Date.now() + 3_600_000 }),
      });
      const done = await settled(g, queued.id, 20_000);
      expect(done.deadLetteredAt).toBeDefined();
      expect(Date.parse(done.deadLetteredAt ?? '') - Date.parse(done.createdAt)).toBeGreaterThan(
        2_000,
      );
      await eventually(async () => expect(await g.deadLetters.get(queued.id)).toBeDefined());
      // Redis keeps the record a lifetime and a minute from its end, past its entry.
      const key = q.layout.of(queued.id).execution(queued.id);
      expect(await client().pttl(key)).toBeGreaterThan(FINISHED_GRACE_MS + 1_000);
      const read = await app.inject({ method: 'GET', url: `/api/executions/${queued.id}` });
      expect(read.statusCode).toBe(200);
      const listed = await app.inject({ method: 'GET', url: '/api/executions?status=failed' });
      expect(listed.json<{ items: Execution[] }>().items.map((e) => e.id)).toEqual([queued.id]);
      const events = await g.store.events(queued.id, 0);
      expect(events.at(-1)).toMatchObject({ type: 'failed', deadLettered: true });
      const retried = await app.inject({
        method: 'POST',
        url: `/api/dead-letters/${queued.id}/retry`,
      });
      expect(retried.statusCode, retried.body).toBe(202);
      expect(retried.json()).toMatchObject({ replayOf: queued.id });
    });

    it("a dead-letter entry lives a lifetime from its execution's dead-lettering, however often it is added", async () => {
      const t0 = Date.parse('2026-11-28T12:00:00Z');
      const clock = { now: t0 };
      const store = new RedisDeadLetterStore({
        redis: client(),
        layout: q.layout,
        ttlMs: 1_000,
        now: () => clock.now,
      });
      await expectLifetimeFromDeadLettering(store, clock, (id, ms) => ({
        executionId: id,
        triggerKey: KEY,
        namespace: 'shop',
        workflowId: 'shop_development_orders',
        createdAt: new Date(t0 - 60_000).toISOString(),
        deadLetteredAt: new Date(ms).toISOString(),
        attempts: 2,
        error: { message: 'down' },
      }));
    });

    it('a trigger deleted and re-created while an attempt waits: the next attempt fails as unrunnable, not dead-lettered', async () => {
      const target = deploy(flaky, onFail(3, '1s'));
      const g = gateway();
      await worker().start();
      const queued = await g.engine.start({
        ...target,
        input: trigger({ n: 1, failUntil: Date.now() + 3_600_000 }),
        callbackUrl: 'https://receiver.test/hook',
      });
      await eventually(async () => expect(await due(client())).toBe(1));
      // Another WebhookTrigger of its name now (another uid), before attempt 2 is due.
      const now = q.targets.get(KEY) as JobTarget;
      q.targets.set(KEY, { ...now, route: { ...now.route, uid: 'uid-2' } });
      const done = await settled(g, queued.id);
      expect(done).toMatchObject({
        status: 'failed',
        error: { code: 'HG_ERR_TRIGGER_RECREATED', kind: 'unrunnable' },
      });
      expect(done.failedAttempts?.map((a) => [a.attempt, a.error.kind])).toEqual([[1, 'fail']]);
      expect(done.log.every((line) => (line.attempt ?? 1) === 1)).toBe(true);
      expect(done).not.toHaveProperty('nextAttemptAt');
      expect(done.deadLetteredAt).toBeUndefined();
      expect(await g.deadLetters.count()).toBe(0);
      const events = await g.store.events(queued.id, 0);
      expect(events.filter((e) => e.type === 'attempt.started')).toHaveLength(0);
      expect(events.at(-1)).toMatchObject({
        type: 'failed',
        error: { code: 'HG_ERR_TRIGGER_RECREATED' },
      });
      expect(events.at(-1)).not.toHaveProperty('deadLettered');
      await eventually(async () => expect(await depth(client())).toBe(0));
      expect(await due(client())).toBe(0);
    });

    it('a non-retryable failure is not handed to the retry set', async () => {
      const target = deploy(
        [{ id: 'broken', type: 'transform', expression: '$undefinedFunction()' }],
        onFail(5, '50ms'),
      );
      const g = gateway();
      const queued = await g.engine.start({ ...target, input: trigger({}) });
      await worker().start();
      const done = await settled(g, queued.id);
      expect(done).toMatchObject({ status: 'failed', error: { kind: 'nodeError' } });
      expect(done.attempt).toBeUndefined();
      expect(done.log).toHaveLength(1);
      expect(await due(client())).toBe(0);
      expect(await g.deadLetters.count()).toBe(0);
    });

    it('due attempts move to the stream once each, however many workers move them at once', async () => {
      const redis = client();
      const store = new RedisExecutionStore({ redis, layout: q.layout });
      const queues = Array.from(
        { length: 4 },
        () => new RedisRetryQueue({ redis: client(), store }),
      );
      const now = Date.now();
      for (let i = 0; i < 200; i++) {
        const job = JSON.stringify({ id: `e${i}`, attempt: 2 });
        await redis.zadd(q.layout.of(`e${i}`).retries, now - 1, job);
      }
      const later = q.layout.of('later').retries;
      await redis.zadd(later, now + 60_000, JSON.stringify({ id: 'later', attempt: 2 }));
      const moved = await Promise.all(
        queues.flatMap((q) => [q.promote(now, 30), q.promote(now, 30), q.promote(now, 30)]),
      );
      const more = await queues[0]!.promote(now, 1000);
      expect(moved.reduce((a, b) => a + b, 0) + more).toBe(200);
      expect(await depth(redis)).toBe(200);
      const ids: string[] = [];
      for (const shard of q.layout.shards) {
        const entries = (await redis.xrange(shard.stream, '-', '+')) as [string, string[]][];
        for (const [, fields] of entries) {
          const { id } = JSON.parse(fields[1] ?? '{}') as { id: string };
          // Each job went back to its own shard's stream.
          expect(q.layout.shardOf(id)).toBe(shard.shard);
          ids.push(id);
        }
      }
      expect(new Set(ids).size).toBe(200);
      expect(await due(redis)).toBe(1);
      expect(await redis.zrange(later, '0', '-1')).toEqual([
        JSON.stringify({ id: 'later', attempt: 2 }),
      ]);
    });

    it('a job whose attempt the record has moved past is dropped (its worker died after the hand-off)', async () => {
      const target = deploy(flaky, onFail(3, '10s'));
      const g = gateway();
      const queued = await g.engine.start({
        ...target,
        input: trigger({ n: 1, failUntil: Date.now() + 3_600_000 }),
      });
      // As if a worker ran attempt 1, handed attempt 2 over, and died before its XACK:
      // the record waits for attempt 2; attempt 1's job is still in the stream.
      const record = (await g.store.get(queued.id)) as Execution;
      await g.store.save({
        ...record,
        nextAttemptAt: new Date(Date.now() + 10_000).toISOString(),
        failedAttempts: [
          {
            attempt: 1,
            startedAt: record.createdAt,
            finishedAt: record.createdAt,
            error: { message: 'not yet', kind: 'fail' },
          },
        ],
      });
      await worker().start();
      await eventually(async () => expect(await depth(client())).toBe(0));
      const after = await g.store.get(queued.id);
      expect(after).toMatchObject({ status: 'queued', log: [] });
      expect(after?.attempt).toBeUndefined();
    });

    it('admin recovery through the queue: bulk retry of dead letters and replay (ok, schema now rejects, trigger gone)', async () => {
      // Fails until failUntil, two attempts 50 ms apart: dead-lettered; once the time has
      // passed, a retry or a replay succeeds.
      const target = deploy(flaky, onFail(2, '50ms'));
      const g = gateway();
      const { app, routes, current } = await adminApp(g);
      await worker().start();
      const failUntil = Date.now() + 1_500;
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const queued = await g.engine.start({ ...target, input: trigger({ n: i, failUntil }) });
        ids.push(queued.id);
      }
      for (const id of ids) expect((await settled(g, id)).deadLetteredAt).toBeDefined();
      await eventually(async () => expect(await g.deadLetters.count()).toBe(3));
      await sleep(Math.max(0, failUntil - Date.now()) + 50);
      const bulk = async () =>
        (
          await app.inject({
            method: 'POST',
            url: '/api/dead-letters/retry',
            payload: { namespace: 'shop' },
          })
        ).json<{
          matched: number;
          retried: number;
          executions: { executionId: string; replayOf: string }[];
        }>();
      const [a, b] = await Promise.all([bulk(), bulk()]);
      expect(a.retried + b.retried).toBe(3);
      const runs = [...a.executions, ...b.executions];
      expect(runs.map((r) => r.replayOf).sort()).toEqual([...ids].sort());
      for (const r of runs) {
        expect(await settled(g, r.executionId)).toMatchObject({
          status: 'succeeded',
          replayOf: r.replayOf,
        });
      }
      expect(await bulk()).toMatchObject({ matched: 0, retried: 0 });
      expect(await g.deadLetters.count()).toBe(0);

      // Replay of a finished execution: a new one, run by the worker.
      const replayed = await app.inject({
        method: 'POST',
        url: `/api/executions/${ids[0]}/replay`,
      });
      expect(replayed.statusCode, replayed.body).toBe(202);
      const replay = replayed.json<{ executionId: string }>();
      expect(await settled(g, replay.executionId)).toMatchObject({
        status: 'succeeded',
        replayOf: ids[0],
        output: { done: 0 },
      });
      // The input schema now wants n to be a string: 422 with the violation.
      const strict: RouteRecord = {
        ...current.route,
        generation: 2,
        spec: {
          ...current.route.spec,
          schema: {
            mode: 'manual',
            input: { fields: [{ name: 'n', type: 'string', required: true }] },
          },
        },
      };
      await routes.put(KEY, strict);
      const rejected = await app.inject({
        method: 'POST',
        url: `/api/executions/${ids[1]}/replay`,
      });
      expect(rejected.statusCode).toBe(422);
      expect(rejected.json()).toMatchObject({
        type: 'https://hookgate.dev/problems/replay-schema-rejected',
        errors: [expect.objectContaining({ pointer: '/n' })],
      });
      // The trigger was deleted and created again under its name (another uid): the
      // stored request came in on the one before, and is sent through the newcomer only
      // when asked (then on to the checks after: here the schema's 422).
      await routes.put(KEY, { ...strict, uid: 'uid-2' });
      const recreated = await app.inject({
        method: 'POST',
        url: `/api/executions/${ids[1]}/replay`,
      });
      expect(recreated.statusCode, recreated.body).toBe(409);
      expect(recreated.json()).toMatchObject({
        type: 'https://hookgate.dev/problems/replay-trigger-recreated',
        code: 'HG_ERR_REPLAY_TRIGGER_RECREATED',
        executionId: ids[1],
        trigger: KEY,
      });
      const allowed = await app.inject({
        method: 'POST',
        url: `/api/executions/${ids[1]}/replay?allowRecreated=true`,
      });
      expect(allowed.statusCode).toBe(422);
      // The trigger is gone: 409.
      await routes.delete(KEY);
      const gone = await app.inject({ method: 'POST', url: `/api/executions/${ids[1]}/replay` });
      expect(gone.statusCode).toBe(409);
      expect(gone.json()).toMatchObject({
        type: 'https://hookgate.dev/problems/replay-trigger-gone',
      });
    });

    describe('a worker process killed with SIGKILL', () => {
      const children: ChildProcess[] = [];
      afterEach(() => {
        for (const c of children.splice(0)) c.kill('SIGKILL');
      });

      async function publish(nodes: Partial<WorkflowNode>[], retry: RetryPolicy) {
        const redis = client();
        const routes = new RedisRecordStore<RouteRecord>({ redis, key: REDIS_KEYS.routes });
        const workflows = new RedisRecordStore<WorkflowRegistration>({
          redis,
          key: REDIS_KEYS.workflows,
        });
        const r = route(KEY);
        const w = workflow(nodes, { retry });
        await routes.put(r.key, r);
        await workflows.put(w.workflowId, w);
        routes.close();
        workflows.close();
        return { workflow: w, trigger: triggerRef(r) };
      }

      async function spawnWorker(): Promise<ChildProcess> {
        // A port the kernel chose free just now: a random one can be taken on a loaded CI
        // machine running 146 files, and the worker then exits before it reads the queue.
        const port = await freePort();
        const child = spawn(
          process.execPath,
          [join(root, 'roles/cli.ts'), 'worker', '--port', String(port)],
          {
            env: {
              ...process.env,
              REDIS_URL: q.backend.url,
              HOOKGATE_QUEUE_SHARDS: String(shards),
              HOOKGATE_WORKER_CLAIM_IDLE_MS: '1000',
              LOG_LEVEL: 'silent',
            },
            stdio: 'ignore',
          },
        );
        children.push(child);
        return child;
      }

      const killed = (child: ChildProcess) =>
        new Promise<void>((done) => {
          child.once('exit', () => done());
          child.kill('SIGKILL');
        });

      it('mid-backoff and then mid-attempt: the execution still dead-letters, once, with every attempt', async () => {
        // Attempt 1 fails at once; attempt 2 waits 2 s in backoff, then spends 1.5 s in a
        // delay before failing; attempt 3 fails: dead-lettered.
        const nodes: Partial<WorkflowNode>[] = [
          { id: 'check', type: 'if', condition: '$count($trigger.body.slow) > 0', else: 'stop' },
          { id: 'pause', type: 'delay', duration: '1500ms' },
          { id: 'stop', type: 'fail', expression: '"still down"', statusCode: 503 },
        ];
        const target = await publish(nodes, onFail(3, '2s'));
        const g = gateway();
        const queued = await g.engine.start({ ...target, input: trigger({ slow: [1] }) });
        const events: SequencedEvent[] = [];
        g.engine.subscribe(queued.id, 0, (e) => events.push(e));
        const first = await spawnWorker();
        // Mid-backoff: attempt 1 has failed and attempt 2 waits in the retry set (the
        // record says when, written in the same script as the set).
        await eventually(
          async () => expect((await g.store.get(queued.id))?.nextAttemptAt).toBeDefined(),
          45_000,
          20,
        );
        await killed(first);
        expect(await due(client())).toBe(1);
        const second = await spawnWorker();
        // Mid-attempt: attempt 2 runs (its delay node started).
        await eventually(
          () =>
            expect(
              events.some((e) => e.type === 'attempt.started' && e.attempt === 2) &&
                events.filter((e) => e.type === 'node.started' && e.nodeId === 'pause').length >= 2,
            ).toBe(true),
          45_000,
          20,
        );
        await killed(second);
        await spawnWorker();
        const done = await settled(g, queued.id, 60_000);
        expect(done).toMatchObject({ status: 'failed', attempt: 3, error: { kind: 'fail' } });
        expect(done.failedAttempts?.map((a) => a.attempt)).toEqual([1, 2]);
        // The killed attempt 2 ran again from its first node: its log lines are those of
        // the rerun only.
        expect(done.log.map((l) => [l.attempt, l.nodeId])).toEqual([
          [1, 'check'],
          [1, 'pause'],
          [1, 'stop'],
          [2, 'check'],
          [2, 'pause'],
          [2, 'stop'],
          [3, 'check'],
          [3, 'pause'],
          [3, 'stop'],
        ]);
        await eventually(async () => expect(await g.deadLetters.count()).toBe(1), 10_000);
        expect((await g.deadLetters.list({})).map((e) => e.executionId)).toEqual([queued.id]);
        // One logical execution: one record, one terminal event, nothing left queued.
        expect((await g.engine.list({ triggerKey: KEY })).map((e) => e.id)).toEqual([queued.id]);
        const stored = await g.store.events(queued.id, 0);
        expect(stored.filter((e) => e.type === 'failed')).toHaveLength(1);
        expect(stored.map((e) => e.seq)).toEqual(stored.map((_, i) => i + 1));
        await eventually(async () => expect(await depth(client())).toBe(0), 10_000);
        expect(await due(client())).toBe(0);
        await sleep(10);
      }, 120_000);
    });
  });
