// Fair run slots in a Redis-queued deployment (ADR 0049): a worker whose jobs come from
// more than one namespace reads ahead of its free slots, so that its engine gives the
// next free slot to the namespace holding the fewest; one that sees one namespace reads
// as before; jobs read ahead and not started at close() are left to another worker.
import { describe, expect, it } from 'vitest';
import type { WorkflowNode } from '../../api/v1alpha1/workflow.ts';
import type { Execution } from '../../runtime/engine/ports.ts';
import { triggerRef } from '../../runtime/engine/trigger-ref.ts';
import type { JobTarget } from '../../runtime/engine/worker.ts';
import { eventually, sleep } from '../support/eventually.ts';
import { redisAvailable } from '../support/redis.ts';
import { singleRedis } from '../support/redis-backends.ts';
import { finished, route, trigger, workflow } from './helpers.ts';
import { redisQueueHarness } from './queue-harness.ts';

describe.skipIf(!redisAvailable())('fair run slots of Redis-queued executions', () => {
  const q = redisQueueHarness(singleRedis, 1);
  const { gateway, worker } = q;

  /** Deploys a trigger of `namespace` for the workers; returns what a gateway hands the engine. */
  function deploy(namespace: string, nodes: Partial<WorkflowNode>[], name = 'hook') {
    const key = `${namespace}/${name}`;
    const workflowId = `${namespace}_development_${name}`;
    const target: JobTarget = {
      route: { ...route(key, workflowId), namespace },
      workflow: workflow(nodes, {}, workflowId),
    };
    q.targets.set(key, target);
    return { workflow: target.workflow, trigger: triggerRef(target.route) };
  }
  const slow = (ms: number) => [{ id: 'wait', type: 'delay' as const, duration: `${ms}ms` }];
  const quick = [{ id: 'a', type: 'transform' as const, expression: 'body' }];
  const startedMs = (e: Execution) => Date.parse(e.startedAt ?? '');

  it('a job of a namespace holding no slot goes ahead of older jobs of one that holds them', async () => {
    const blue = deploy('blue', slow(600));
    const greenQuick = deploy('green', quick);
    const green = deploy('green', slow(600), 'slow');
    const g = gateway();
    const ids: Record<string, string> = {};
    // In stream order; one slot frees at once (g0), the others after 600 ms.
    for (const [name, target] of [
      ['b1', blue],
      ['g0', greenQuick],
      ['b2', blue],
      ['b3', blue],
      ['b4', blue],
      ['g1', green],
    ] as const)
      ids[name] = (await g.engine.start({ ...target, input: trigger({ name }) })).id;
    await worker({ concurrency: 2, lookahead: 4 }).start();
    const done = Object.fromEntries(
      await Promise.all(
        Object.entries(ids).map(async ([name, id]) => [name, await finished(g.engine, id)]),
      ),
    ) as Record<string, Execution>;
    for (const e of Object.values(done)) expect(e.status).toBe('succeeded');
    // In stream order g1 would start after b4, once b3 ended (1.2 s in). Read ahead, it
    // takes the first slot that frees while blue holds one (g0's, or b1's if g0 ended
    // before the read), a whole delay before b4.
    expect(startedMs(done.b4 as Execution) - startedMs(done.g1 as Execution)).toBeGreaterThan(300);
    // Within blue, arrival order.
    const blueStarts = ['b1', 'b2', 'b3', 'b4'].map((name) => startedMs(done[name] as Execution));
    expect(blueStarts).toEqual([...blueStarts].sort((a, b) => a - b));
  });

  it('a worker that sees one namespace takes no more jobs than it has free slots', async () => {
    const blue = deploy('blue', slow(300));
    const g = gateway();
    const ids: string[] = [];
    for (let i = 0; i < 6; i++)
      ids.push((await g.engine.start({ ...blue, input: trigger({ i }) })).id);
    const w = worker({ concurrency: 2, lookahead: 4 });
    await w.start();
    let most = 0;
    let finishedAll = false;
    const all = Promise.all(ids.map((id) => finished(g.engine, id))).then((done) => {
      finishedAll = true;
      return done;
    });
    while (!finishedAll) {
      most = Math.max(most, w.running);
      await sleep(10);
    }
    expect((await all).every((e) => e.status === 'succeeded')).toBe(true);
    expect(most).toBe(2);
  });

  it('jobs read ahead and not started at close() are left unacknowledged, and another worker runs them', async () => {
    const blue = deploy('blue', slow(500));
    const green = deploy('green', slow(500));
    const cyan = deploy('cyan', quick);
    const g = gateway();
    const b1 = await g.engine.start({ ...blue, input: trigger({ name: 'b1' }) });
    const g1 = await g.engine.start({ ...green, input: trigger({ name: 'g1' }) });
    const c1 = await g.engine.start({ ...cyan, input: trigger({ name: 'c1' }) });
    const c2 = await g.engine.start({ ...cyan, input: trigger({ name: 'c2' }) });
    const w1 = worker({ consumer: 'w1', concurrency: 2, lookahead: 2 });
    await w1.start();
    // b1 and g1 run; c1 and c2, read ahead, wait in the engine for a slot.
    await eventually(() => expect(w1.running).toBe(4));
    await w1.close(5_000);
    expect((await g.engine.get(b1.id))?.status).toBe('succeeded');
    expect((await g.engine.get(g1.id))?.status).toBe('succeeded');
    // Neither run nor failed: queued, their jobs still pending.
    for (const { id } of [c1, c2]) expect((await g.engine.get(id))?.status).toBe('queued');
    await worker({ consumer: 'w2', claimIdleMs: 300 }).start();
    for (const { id } of [c1, c2]) {
      const done = await finished(g.engine, id);
      expect(done.status).toBe('succeeded');
      const events = await g.store.events(id, 0);
      expect(events.filter((e) => e.type === 'node.started')).toHaveLength(1);
    }
  });
});
