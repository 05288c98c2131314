// What the worker pool sends a worker (ADR 0048, amended 2026-11-28 (night)): only the
// bindings an expression names, and an execution's trigger record once per worker, held
// there under the execution's context until it ends or the worker's byte bound evicts it.
import jsonata from 'jsonata';
import { afterEach, describe, expect, it } from 'vitest';
import type { WorkflowNode } from '../../api/v1alpha1/workflow.ts';
import { InProcessEngine } from '../../runtime/engine/engine.ts';
import { needsOf } from '../../runtime/engine/expression-needs.ts';
import { ExpressionCache, type ExpressionLimits } from '../../runtime/engine/expressions.ts';
import { finished, ref, trigger, workflow } from './helpers.ts';

const caches: ExpressionCache[] = [];
function workerCache(pool: ExpressionLimits['pool'] = {}): ExpressionCache {
  const cache = new ExpressionCache({ isolation: 'worker', pool: { size: 1, ...pool } });
  caches.push(cache);
  return cache;
}
afterEach(async () => {
  await Promise.all(caches.splice(0).map((c) => c.close()));
});

/** A trigger record whose body holds about `bytes` of text. */
function record(name: string, bytes = 1000): Record<string, unknown> {
  // (Evaluated below with $string(...): a plain path would take the fast path, no worker.)
  return { body: { name, pad: 'x'.repeat(bytes) }, headers: {}, metadata: { name } };
}

describe('the bindings an expression names', () => {
  it('are read off its syntax tree; $eval names them all', () => {
    const named = (source: string): string[] | 'all' => {
      const { bindings } = needsOf(jsonata(source).ast());
      return bindings === 'all' ? 'all' : [...bindings].sort();
    };
    expect(named('$trigger.body.name')).toEqual(['trigger']);
    expect(named('$merge([$nodes.a, { "x": $$.y, "z": $ }])')).toEqual(['merge', 'nodes']);
    expect(named('body.items[qty > 1].sku')).toEqual([]);
    expect(named('($f := function($v) { $v & $trigger.a }; $f(x))')).toEqual(['f', 'trigger', 'v']);
    expect(named('x ?? $nodes.b')).toEqual(['exists', 'nodes']);
    expect(named('$eval(body.code)')).toBe('all');
  });

  it('only those are sent: a binding that cannot be sent fails only the expressions naming it', async () => {
    const cache = workerCache();
    const input = record('ada');
    // A function cannot be serialized for a worker.
    const bindings = { trigger: input, nodes: { f: () => 1 } };
    await expect(
      cache.evaluate('w@1', '$uppercase($trigger.body.name)', input, bindings),
    ).resolves.toBe('ADA');
    await expect(cache.evaluate('w@1', '$count(body.name)', input, bindings)).resolves.toBe(1);
    await expect(cache.evaluate('w@1', '$count($keys($nodes))', input, bindings)).rejects.toThrow(
      /its input cannot be passed/,
    );
    // $eval may read any binding: all go.
    await expect(cache.evaluate('w@1', '$eval("body.name")', input, bindings)).rejects.toThrow(
      /its input cannot be passed/,
    );
  }, 20_000);
});

describe('an execution context', () => {
  it('sends the trigger record to a worker once per execution, for $ and $trigger alike', async () => {
    const cache = workerCache();
    const input = record('ada');
    const run = cache.forExecution(input);
    const bindings = { trigger: input, nodes: {} };
    for (let i = 0; i < 5; i++) {
      await expect(run.evaluate('w@1', '$uppercase(body.name)', input, bindings)).resolves.toBe(
        'ADA',
      );
      await expect(
        run.evaluate('w@1', '$trigger.body.name & $string($count($keys($)))', {}, bindings),
      ).resolves.toBe('ada0');
    }
    expect(cache.contextCounts()).toEqual([
      { held: 1, bytes: expect.any(Number) as number, reported: 1, sent: 1 },
    ]);
    run.end();
  }, 20_000);

  it('two executions on one worker each read their own record, interleaved', async () => {
    const cache = workerCache();
    const a = record('ada');
    const b = record('bob');
    const runA = cache.forExecution(a);
    const runB = cache.forExecution(b);
    const source = '$uppercase(body.name) & "/" & $trigger.metadata.name';
    for (let i = 0; i < 3; i++) {
      const [fromA, fromB] = await Promise.all([
        runA.evaluate('w@1', source, a, { trigger: a, nodes: {} }),
        runB.evaluate('w@1', source, b, { trigger: b, nodes: {} }),
      ]);
      expect([fromA, fromB]).toEqual(['ADA/ada', 'BOB/bob']);
    }
    // A node output as the input: the record is $trigger only.
    await expect(
      runB.evaluate('w@1', 'name & "/" & $trigger.body.name', { name: 'out' }, { trigger: b }),
    ).resolves.toBe('out/bob');
    expect(cache.contextCounts()).toMatchObject([{ held: 2, reported: 2, sent: 2 }]);
    runA.end();
    runB.end();
  }, 20_000);

  it('is let go of when its execution ends, by the pool and by the worker', async () => {
    const cache = workerCache();
    const a = record('ada');
    const runA = cache.forExecution(a);
    await runA.evaluate('w@1', '$string(body.name)', a, { trigger: a });
    expect(cache.contextCounts()).toMatchObject([{ held: 1, reported: 1 }]);
    runA.end();
    expect(cache.contextCounts()).toMatchObject([{ held: 0, bytes: 0 }]);
    // The worker says what it holds with its next answer: the new execution's record only.
    const b = record('bob');
    const runB = cache.forExecution(b);
    await expect(runB.evaluate('w@1', '$string(body.name)', b, { trigger: b })).resolves.toBe(
      'bob',
    );
    expect(cache.contextCounts()).toMatchObject([{ held: 1, reported: 1, sent: 2 }]);
    // An ended execution's evaluations still answer (the record goes with each call).
    await expect(runA.evaluate('w@1', '$string(body.name)', a, { trigger: a })).resolves.toBe(
      'ada',
    );
    expect(cache.contextCounts()).toMatchObject([{ held: 1, reported: 1 }]);
    runB.end();
  }, 20_000);

  it('a worker holds records within its byte bound: the least recently used are evicted and sent again', async () => {
    // 16 KB: room for three records of about 5 KB, not four.
    const cache = workerCache({ maxContextMb: 16 / 1024 });
    const records = ['a', 'b', 'c', 'd', 'e'].map((name) => record(name, 5000));
    const runs = records.map((r) => cache.forExecution(r));
    for (const [i, run] of runs.entries()) {
      const r = records[i];
      await expect(run.evaluate('w@1', '$string(metadata.name)', r, { trigger: r })).resolves.toBe(
        ['a', 'b', 'c', 'd', 'e'][i],
      );
      const [count] = cache.contextCounts();
      expect(count?.bytes).toBeLessThanOrEqual(16 * 1024);
      expect(count?.reported).toBe(count?.held);
    }
    expect(cache.contextCounts()).toMatchObject([{ held: 3, sent: 5 }]);
    // 'a' was evicted: it goes again, and answers as before.
    const [first] = records;
    await expect(
      runs[0]?.evaluate('w@1', '$string(metadata.name)', first, { trigger: first }),
    ).resolves.toBe('a');
    expect(cache.contextCounts()).toMatchObject([{ held: 3, sent: 6 }]);
    // A record over the whole bound is used for its call and not kept.
    const big = record('big', 20_000);
    const run = cache.forExecution(big);
    await expect(
      run.evaluate('w@1', '$string(metadata.name)', big, { trigger: big }),
    ).resolves.toBe('big');
    expect(cache.contextCounts()).toMatchObject([{ held: 3, reported: 3, sent: 7 }]);
    for (const r of [...runs, run]) r.end();
    expect(cache.contextCounts()).toMatchObject([{ held: 0, bytes: 0 }]);
  }, 20_000);

  it('a worker that failed is replaced, and the record goes to the new one', async () => {
    const cache = workerCache();
    const a = record('ada');
    const run = cache.forExecution(a);
    await expect(run.evaluate('w@1', '$string(body.name)', a, { trigger: a })).resolves.toBe('ada');
    // Past the worker's heap (or, on a loaded machine, its deadline first): either ends it.
    await expect(
      run.evaluate('w@1', '$count([1..1e7].[1..1e2])', a, { trigger: a }),
    ).rejects.toThrow(/exceeded its (memory|time) limit/);
    await expect(
      run.evaluate('w@1', '$string($trigger.body.name)', a, { trigger: a }),
    ).resolves.toBe('ada');
    // The new worker's account: the record went to it once.
    expect(cache.contextCounts()).toMatchObject([{ held: 1, reported: 1, sent: 1 }]);
    run.end();
  }, 20_000);
});

describe('an execution in the engine', () => {
  it('ends its context when it ends, succeeded or failed', async () => {
    const engine = new InProcessEngine({
      onInternalError: () => {},
      expressions: { isolation: 'worker', pool: { size: 1 } },
    });
    try {
      const nodes: Partial<WorkflowNode>[] = [
        { id: 'a', type: 'transform', expression: '{ "n": $count(body.items) }' },
        {
          id: 'b',
          type: 'transform',
          expression: '{ "n": n, "who": $uppercase($trigger.body.who) }',
        },
      ];
      const body = { who: 'ada', items: [1, 2, 3] };
      const s = await engine.start({
        workflow: workflow(nodes),
        trigger: ref(),
        input: trigger(body),
      });
      const execution = await finished(engine, s.id);
      expect(execution).toMatchObject({ status: 'succeeded', output: { n: 3, who: 'ADA' } });
      expect(engine.expressions.contextCounts()).toMatchObject([{ held: 0, bytes: 0, sent: 1 }]);
      const failing: Partial<WorkflowNode>[] = [
        { id: 'a', type: 'transform', expression: '$error("no " & body.who)' },
      ];
      const f = await engine.start({
        workflow: workflow(failing),
        trigger: ref(),
        input: trigger(body),
      });
      expect(await finished(engine, f.id)).toMatchObject({ status: 'failed' });
      expect(engine.expressions.contextCounts()).toMatchObject([{ held: 0, bytes: 0, sent: 2 }]);
    } finally {
      await engine.close(1000);
    }
  }, 20_000);
});
