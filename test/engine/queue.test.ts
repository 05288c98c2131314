// The Redis execution queue: gateways' QueuedEngine enqueues, ExecutionWorkers run,
// everything through a real redis-server. At least once (G14): a job abandoned by a dead
// worker is run again by another, with the same execution id.
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import type { WorkflowNode } from '../../api/v1alpha1/workflow.ts';
import { InProcessEngine } from '../../runtime/engine/engine.ts';
import { RedisExecutionEvents } from '../../runtime/engine/execution-events-redis.ts';
import { RedisExecutionStore } from '../../runtime/engine/execution-store-redis.ts';
import type { SequencedEvent } from '../../runtime/engine/ports.ts';
import { QUEUE, QueuedEngine } from '../../runtime/engine/queued-engine.ts';
import { readQueueState } from '../../runtime/engine/queue-state.ts';
import { triggerRef } from '../../runtime/engine/trigger-ref.ts';
import { ExecutionWorker, type JobTarget } from '../../runtime/engine/worker.ts';
import { HttpProblem } from '../../runtime/errors.ts';
import { eventually, sleep } from '../support/eventually.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';
import { credentialLeaks, finished, route, trigger, workflow } from './helpers.ts';

describe.skipIf(!redisAvailable())('Redis execution queue', () => {
  let server: RedisServer;
  const clients: Redis[] = [];
  const closers: (() => Promise<void> | void)[] = [];
  let targets: Map<string, JobTarget>;

  const client = () => {
    const c = new Redis(server.url, { lazyConnect: false });
    clients.push(c);
    return c;
  };

  function gateway(options: { maxQueued?: number; depthEveryMs?: number } = {}) {
    const redis = client();
    const store = new RedisExecutionStore({ redis });
    const events = new RedisExecutionEvents({ subscriber: client(), store });
    const engine = new QueuedEngine({ redis, store, events, ...options });
    closers.push(() => engine.close());
    return { engine, store, events };
  }

  function worker(
    options: {
      consumer?: string;
      claimIdleMs?: number;
      concurrency?: number;
      engine?: InProcessEngine;
    } = {},
  ) {
    const redis = client();
    const store = new RedisExecutionStore({ redis });
    const engine = new InProcessEngine({ store, streamEvents: true, onInternalError: () => {} });
    const w = new ExecutionWorker({
      redis,
      blocking: client(),
      engine,
      store,
      resolve: (job) => Promise.resolve(targets.get(job.triggerKey)),
      blockMs: 200,
      onInternalError: () => {},
      ...options,
    });
    closers.push(() => w.close(2_000));
    return w;
  }

  /** Deploys for the workers; returns what a gateway hands the engine. */
  function deploy(nodes: Partial<WorkflowNode>[], key = 'shop/orders-hook') {
    const target: JobTarget = { route: route(key), workflow: workflow(nodes) };
    targets.set(key, target);
    return { workflow: target.workflow, trigger: triggerRef(target.route) };
  }

  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(async () => {
    await server?.stop();
  });
  beforeEach(async () => {
    targets = new Map();
    await client().flushall();
  });
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
    for (const c of clients.splice(0)) c.disconnect();
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
    expect((await other.engine.list({ triggerKey: 'shop/orders-hook' })).map((e) => e.id)).toEqual([
      queued.id,
    ]);
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
    await eventually(async () => expect(await redis.xlen(QUEUE.stream)).toBe(0));
    expect(await redis.xpending(QUEUE.stream, QUEUE.group)).toEqual([0, null, null, null]);
  });

  it('a job abandoned by a dead worker is run again by another, under the same id (G14)', async () => {
    const target = deploy([{ id: 'a', type: 'transform', expression: '{ "ok": true }' }]);
    const g = gateway();
    const queued = await g.engine.start({ ...target, input: trigger({}) });
    // A worker that read the job and died: the entry is pending for consumer "dead".
    const redis = client();
    await redis.xgroup('CREATE', QUEUE.stream, QUEUE.group, '0', 'MKSTREAM');
    await redis.xreadgroup('GROUP', QUEUE.group, 'dead', 'COUNT', 1, 'STREAMS', QUEUE.stream, '>');
    await worker({ consumer: 'alive', claimIdleMs: 300 }).start();
    const done = await finished(g.engine, queued.id);
    expect(done.id).toBe(queued.id);
    expect(done.status).toBe('succeeded');
    await eventually(async () => expect(await redis.xlen(QUEUE.stream)).toBe(0));
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
      QUEUE.stream,
      '*',
      'job',
      JSON.stringify({ id: queued.id, triggerKey: 'shop/orders-hook', workflowId: 'x' }),
    );
    await eventually(async () => expect(await redis.xlen(QUEUE.stream)).toBe(0));
    expect(await g.store.events(queued.id, 0)).toEqual(eventsBefore);
  });

  it('an endpoint removed before its job ran fails the execution with a clear message', async () => {
    const target = deploy([{ id: 'a', type: 'transform', expression: '1' }]);
    const g = gateway();
    const queued = await g.engine.start({ ...target, input: trigger({}) });
    targets.clear();
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
    await g.engine.start({ ...target, input: trigger({}) });
    await g.engine.start({ ...target, input: trigger({}) });
    const refused = await g.engine
      .start({ ...target, input: trigger({}) })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(HttpProblem);
    expect((refused as HttpProblem).code).toBe('HG_ERR_ENGINE_OVERLOADED');
    // Nothing drains (no worker): the longest advice.
    expect((refused as HttpProblem).headers).toMatchObject({ 'retry-after': '60' });
    expect(await client().xlen(QUEUE.stream)).toBe(2);
  });

  it('a full queue still answers an id already queued with its record', async () => {
    const target = deploy([{ id: 'a', type: 'transform', expression: '1' }]);
    const stale = gateway({ maxQueued: 2, depthEveryMs: 600_000 });
    await stale.engine.refresh();
    const g = gateway({ maxQueued: 2 });
    const known = await g.engine.start({ ...target, input: trigger({}, 'exec_known') });
    await g.engine.start({ ...target, input: trigger({}) });
    // `stale` read depth 0 before: the script finds the queue full, and the id taken.
    const again = await stale.engine.start({ ...target, input: trigger({ x: 1 }, 'exec_known') });
    expect(again.id).toBe(known.id);
    expect(again.input.body).toEqual({});
    const refused = await stale.engine
      .start({ ...target, input: trigger({}, 'exec_new') })
      .catch((e: unknown) => e);
    expect((refused as HttpProblem).code).toBe('HG_ERR_ENGINE_OVERLOADED');
    expect(await g.store.get('exec_new')).toBeUndefined();
    expect(await client().xlen(QUEUE.stream)).toBe(2);
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
    const outcomes = await Promise.all(
      Array.from({ length: 60 }, (_v, i) =>
        (gateways[i % 3] as (typeof gateways)[number]).engine
          .start({ ...target, input: trigger({ i }) })
          .then(
            () => 'queued',
            (e: unknown) => (e instanceof HttpProblem ? e.code : String(e)),
          ),
      ),
    );
    expect(outcomes.filter((o) => o === 'queued')).toHaveLength(7);
    expect(outcomes.filter((o) => o === 'HG_ERR_ENGINE_OVERLOADED')).toHaveLength(53);
    expect(await client().xlen(QUEUE.stream)).toBe(7);
    // Each refused at Redis: its gateway now knows the queue is full, without a read.
    for (const g of gateways) expect(g.engine.queued).toBeGreaterThanOrEqual(7);
  });

  it('reads depth and the oldest age as they grow, the drain rate as workers catch up, then an empty queue', async () => {
    const target = deploy([{ id: 'a', type: 'transform', expression: '1' }]);
    const g = gateway({ maxQueued: 5, depthEveryMs: 100 });
    const streams = [QUEUE.stream];
    expect(await readQueueState(client(), streams)).toMatchObject({
      depth: 0,
      oldestAgeSeconds: 0,
    });
    for (let i = 0; i < 5; i++) await g.engine.start({ ...target, input: trigger({ i }) });
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
    // The gateway saw the five drain: a rate, and a Retry-After below the longest.
    await eventually(() => {
      expect(g.engine.queued).toBe(0);
      expect(g.engine.oldestAgeSeconds).toBe(0);
      expect(g.engine.drainPerSecond).toBeGreaterThan(0);
    });
  });

  it('an id given twice queues one execution', async () => {
    const target = deploy([{ id: 'a', type: 'transform', expression: '1' }]);
    const g = gateway();
    const first = await g.engine.start({ ...target, input: trigger({}, 'exec_fixed') });
    const second = await g.engine.start({ ...target, input: trigger({ other: 1 }, 'exec_fixed') });
    expect(second.id).toBe(first.id);
    expect(second.input.body).toEqual({});
    expect(await client().xlen(QUEUE.stream)).toBe(1);
  });

  it('a worker hands its engine the trigger, never the credentials of the route it read', async () => {
    const target = deploy([{ id: 'a', type: 'transform', expression: '{ "t": $trigger }' }]);
    const material = ['0f'.repeat(32), 'jwt-hmac-secret-0123456789', 'test-token-abcdef'];
    (targets.get('shop/orders-hook') as JobTarget).route.credentials = {
      apiKeys: [{ consumer: 'acme', sha256: '0f'.repeat(32) }],
      jwtKey: 'jwt-hmac-secret-0123456789',
      testCredential: 'test-token-abcdef',
    };
    const store = new RedisExecutionStore({ redis: client() });
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
    expect(await client().xlen(QUEUE.stream)).toBe(0);
  });
});
