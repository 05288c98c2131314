// What the worker pool sends a worker (ADR 0048, amended 2026-11-28 (night)): only the
// bindings an expression names, and an execution's trigger record once per worker, held
// there under the execution's context until it ends or the worker's byte bound evicts it.
import { afterEach, describe, expect, it } from 'vitest';
import type { WorkflowNode } from '../../api/v1alpha1/workflow.ts';
import { InProcessEngine } from '../../runtime/engine/engine.ts';
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
  // (Read below with $string($trigger...): a plain path takes the fast path, no worker,
  // and a path on `$` alone gets what it reads of the record, not the record.)
  return { body: { name, pad: 'x'.repeat(bytes) }, headers: {}, metadata: { name } };
}

describe('the bindings an expression names', () => {
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

describe('the parts of its input an expression reads', () => {
  it('only those are sent: the record stays out, and what is not read need not be sendable', async () => {
    const cache = workerCache();
    const input = { ...record('ada'), hook: () => 1 };
    const run = cache.forExecution(input);
    const bindings = { trigger: input, nodes: {} };
    await expect(run.evaluate('w@1', '$uppercase(body.name)', input, bindings)).resolves.toBe(
      'ADA',
    );
    // A node output as the input, cut down the same way.
    await expect(
      run.evaluate('w@1', '$count(out.items)', { out: { items: [1, 2] }, f: () => 2 }, bindings),
    ).resolves.toBe(2);
    expect(cache.contextCounts()).toMatchObject([{ held: 0, sent: 0 }]);
    // All of `$` is the record: it goes, as JSON (as the store keeps it: no function).
    const keys = (await run.evaluate('w@1', '$keys($)', input, bindings)) as string[];
    // (A JSONata sequence: an array with a marker; its items compared.)
    expect([...keys]).toEqual(['body', 'headers', 'metadata']);
    expect(cache.contextCounts()).toMatchObject([{ held: 1, sent: 1 }]);
    run.end();
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
    await runA.evaluate('w@1', '$string($trigger.body.name)', a, { trigger: a });
    expect(cache.contextCounts()).toMatchObject([{ held: 1, reported: 1 }]);
    runA.end();
    expect(cache.contextCounts()).toMatchObject([{ held: 0, bytes: 0 }]);
    // The worker says what it holds with its next answer: the new execution's record only.
    const b = record('bob');
    const runB = cache.forExecution(b);
    await expect(
      runB.evaluate('w@1', '$string($trigger.body.name)', b, { trigger: b }),
    ).resolves.toBe('bob');
    expect(cache.contextCounts()).toMatchObject([{ held: 1, reported: 1, sent: 2 }]);
    // An ended execution's evaluations still answer (the record goes with each call).
    await expect(
      runA.evaluate('w@1', '$string($trigger.body.name)', a, { trigger: a }),
    ).resolves.toBe('ada');
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
      await expect(
        run.evaluate('w@1', '$string($trigger.metadata.name)', r, { trigger: r }),
      ).resolves.toBe(['a', 'b', 'c', 'd', 'e'][i]);
      const [count] = cache.contextCounts();
      expect(count?.bytes).toBeLessThanOrEqual(16 * 1024);
      expect(count?.reported).toBe(count?.held);
    }
    expect(cache.contextCounts()).toMatchObject([{ held: 3, sent: 5 }]);
    // 'a' was evicted: it goes again, and answers as before.
    const [first] = records;
    await expect(
      runs[0]?.evaluate('w@1', '$string($trigger.metadata.name)', first, { trigger: first }),
    ).resolves.toBe('a');
    expect(cache.contextCounts()).toMatchObject([{ held: 3, sent: 6 }]);
    // A record over the whole bound is used for its call and not kept.
    const big = record('big', 20_000);
    const run = cache.forExecution(big);
    await expect(
      run.evaluate('w@1', '$string($trigger.metadata.name)', big, { trigger: big }),
    ).resolves.toBe('big');
    expect(cache.contextCounts()).toMatchObject([{ held: 3, reported: 3, sent: 7 }]);
    for (const r of [...runs, run]) r.end();
    expect(cache.contextCounts()).toMatchObject([{ held: 0, bytes: 0 }]);
  }, 20_000);

  it('a worker that failed is replaced, and the record goes to the new one', async () => {
    const cache = workerCache();
    const a = record('ada');
    const run = cache.forExecution(a);
    await expect(
      run.evaluate('w@1', '$string($trigger.body.name)', a, { trigger: a }),
    ).resolves.toBe('ada');
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

describe('through an execution context', () => {
  it('answers as in this process: the record as $ or $trigger, whole or in part', async () => {
    const worker = workerCache();
    const inline = new ExpressionCache({ isolation: 'inline' });
    const input = {
      body: {
        items: [
          { sku: 'a', qty: 2 },
          { sku: 'b', qty: 0 },
        ],
        name: 'ada',
        total: 1250,
      },
      headers: { 'x-id': '1' },
      metadata: { consumer: 'acme' },
    };
    const node = { total: 3, rows: [{ n: 1 }, { n: 2 }] };
    const sources = [
      '{ "id": body.name, "by": metadata.consumer, "big": body.total >= 1000 }',
      'body.items[qty > 0].sku',
      '$sum(body.items.qty) & "/" & $count($trigger.body.items)',
      '$merge([$, { "ok": true }])',
      '$keys($trigger)',
      'body.items^(>qty).sku',
      'body.items{ sku: qty }',
      '$map(body.items, function($i) { $i.sku & body.name })',
      'total + $count(rows) + $count($trigger.body.items)',
      'rows.n',
      '$string($)',
      'nothing.here',
    ];
    const runWorker = worker.forExecution(input);
    const runInline = inline.forExecution(input);
    try {
      for (const source of sources) {
        for (const value of [input, node]) {
          const bindings = { trigger: input, nodes: { a: node } };
          const expected = await runInline.evaluate('w@1', source, value, bindings);
          await expect(
            runWorker.evaluate('w@1', source, value, bindings),
            `${source} on ${value === input ? 'the record' : 'a node output'}`,
          ).resolves.toEqual(expected);
        }
      }
    } finally {
      runWorker.end();
      runInline.end();
    }
  }, 20_000);
});

describe('a result that shares values with the input or bindings', () => {
  it('shares them in this process too: they come back as references, not copies', async () => {
    const cache = workerCache();
    const input = record('ada', 5000);
    const node = { rows: [{ n: 1 }], total: 2 };
    const bindings = { trigger: input, nodes: { a: node } };
    const run = cache.forExecution(input);
    try {
      const merged = (await run.evaluate(
        'w@1',
        '$merge([$, { "ok": true }])',
        input,
        bindings,
      )) as Record<string, unknown>;
      expect(merged).toEqual({ ...input, ok: true });
      expect(merged.body).toBe(input.body);
      // From a node output as `$`, from $trigger, from $nodes, and the value itself.
      const fromNode = (await run.evaluate(
        'w@1',
        '{ "r": rows, "c": $count(rows) }',
        node,
        bindings,
      )) as Record<string, unknown>;
      expect(fromNode).toEqual({ r: node.rows, c: 1 });
      expect(fromNode.r).toBe(node.rows);
      const parts = (await run.evaluate(
        'w@1',
        '{ "m": $trigger.metadata, "a": $nodes.a, "s": $string($trigger.body.name) }',
        {},
        bindings,
      )) as Record<string, unknown>;
      expect(parts).toEqual({ m: input.metadata, a: node, s: 'ada' });
      expect(parts.m).toBe(input.metadata);
      expect(parts.a).toBe(node);
      await expect(run.evaluate('w@1', '$$.body ? $$ : null', input, bindings)).resolves.toBe(
        input,
      );
    } finally {
      run.end();
    }
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
        { id: 'a', type: 'transform', expression: '$error("no " & $trigger.body.who)' },
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
