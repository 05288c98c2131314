// Expressions evaluated in the worker pool (ADR 0048): an evaluation that allocates
// without bound, or holds its step past its time limit, fails alone; the engine's
// process stays up, small, and keeps serving other executions meanwhile.
import { afterEach, describe, expect, it } from 'vitest';
import { InProcessEngine } from '../../runtime/engine/engine.ts';
import { ExpressionCache } from '../../runtime/engine/expressions.ts';
import type { WorkflowNode } from '../../api/v1alpha1/workflow.ts';
import { finished, ref, trigger, workflow } from './helpers.ts';

/** The isolation under test: `inline` shows what these tests catch without the pool. */
const ISOLATION = process.env.HOOKGATE_TEST_EXPRESSION_ISOLATION === 'inline' ? 'inline' : 'worker';

const engines: InProcessEngine[] = [];
function engine(timeoutMs = 1000): InProcessEngine {
  const e = new InProcessEngine({
    onInternalError: () => {},
    expressions: { timeoutMs, isolation: ISOLATION, pool: { size: 2 } },
  });
  engines.push(e);
  return e;
}
afterEach(async () => {
  await Promise.all(engines.splice(0).map((e) => e.close(1000)));
});

/** Starts a one-node workflow; its finished execution and when it finished (ms). */
async function runOne(
  e: InProcessEngine,
  expression: string,
  body: unknown = {},
): Promise<{ status: string; message: string | undefined; output: unknown; at: number }> {
  const nodes: Partial<WorkflowNode>[] = [{ id: 'map', type: 'transform', expression }];
  const s = await e.start({ workflow: workflow(nodes), trigger: ref(), input: trigger(body) });
  const execution = await finished(e, s.id);
  return {
    status: execution.status,
    message: execution.error?.message,
    output: execution.output,
    at: performance.now(),
  };
}

const rssMb = (): number => process.memoryUsage().rss / 1048576;

describe('expressions in the worker pool: memory', () => {
  it('$pad("", 4e8) fails its execution; the process does not grow and serves the next', async () => {
    const e = engine();
    const before = rssMb();
    const bomb = await runOne(e, '$pad("", 4e8)');
    expect(bomb.status).toBe('failed');
    expect(bomb.message).toMatch(/^node 'map': expression "\$pad\(.*\)" exceeded its memory limit/);
    expect(rssMb() - before).toBeLessThan(150);
    const next = await runOne(e, '{ "hello": $uppercase(body.name) }', { name: 'ada' });
    expect(next).toMatchObject({ status: 'succeeded', output: { hello: 'ADA' } });
  }, 20_000);

  it('[1..1e7].[1..1e2] fails its execution, not the process; another runs meanwhile', async () => {
    const e = engine();
    const before = rssMb();
    const [bomb, other] = await Promise.all([
      runOne(e, '$count([1..1e7].[1..1e2])'),
      runOne(e, '$merge([body, { "ok": true }])', { n: 1 }),
    ]);
    expect(bomb.status).toBe('failed');
    expect(bomb.message).toMatch(/exceeded its memory limit \(64 MB\)/);
    expect(other).toMatchObject({ status: 'succeeded', output: { n: 1, ok: true } });
    expect(rssMb() - before).toBeLessThan(150);
    // The worker that ran out was replaced.
    const again = await runOne(e, '$sum(body.n)', { n: [1, 2] });
    expect(again).toMatchObject({ status: 'succeeded', output: 3 });
  }, 20_000);
});

describe('expressions in the worker pool: time', () => {
  it('a spinning expression ends at its time limit while another execution completes', async () => {
    const e = engine(1000);
    // Both workers started (a cold start is not what is measured).
    await Promise.all([runOne(e, '$sum([1])'), runOne(e, '$sum([2])')]);
    const started = performance.now();
    // Tail calls in constant memory: only the time limit ends it.
    const spin = runOne(e, '($loop := function($i) { $i < 1e9 ? $loop($i + 1) : $i }; $loop(0))');
    await new Promise((resolve) => setTimeout(resolve, 20));
    const quick = await runOne(e, '{ "sum": $sum(body.n) }', { n: [1, 2, 3] });
    const slow = await spin;
    expect(quick).toMatchObject({ status: 'succeeded', output: { sum: 6 } });
    // The other finished while the loop ran, long before the loop's second was up (in
    // process it waited for the whole second); margins for a loaded machine.
    expect(quick.at - started).toBeLessThan(700);
    expect(slow.status).toBe('failed');
    expect(slow.message).toMatch(/timeout after 1000 milliseconds|time limit of 1000 ms/i);
    expect(slow.at - started).toBeLessThan(3000);
  }, 20_000);

  it('a step held past the hard deadline ends its worker, and the evaluation fails', async () => {
    // JSONata checks its limit between steps only: $string of a million numbers is one
    // step of some 700 ms here, which it lets finish; the pool's deadline ends it.
    const cache = new ExpressionCache({
      timeoutMs: 50,
      isolation: ISOLATION,
      pool: { size: 1, graceMs: 0 },
    });
    try {
      await expect(cache.evaluate('w@1', '$sum([1,2])', {}, {})).resolves.toBe(3);
      const started = performance.now();
      await expect(cache.evaluate('w@1', '$length($string([1..1e6]))', {}, {})).rejects.toThrow(
        'expression "$length($string([1..1e6]))" exceeded its time limit of 50 ms',
      );
      // The step alone takes some 700 ms here; ended at 50 ms (a margin for a loaded machine).
      expect(performance.now() - started).toBeLessThan(500);
      // Its worker was replaced.
      await expect(cache.evaluate('w@1', '$sum([1,2])', {}, {})).resolves.toBe(3);
    } finally {
      await cache.close();
    }
  }, 20_000);
});

describe('expressions in the worker pool: results', () => {
  it('answer as in this process: bindings, sequences, regular expressions, errors', async () => {
    const worker = new ExpressionCache({ isolation: 'worker', pool: { size: 1 } });
    const inline = new ExpressionCache({ isolation: 'inline' });
    const input = { body: { items: [{ n: 1 }, { n: 2 }], s: 'Order-12, order-34' } };
    const bindings = { trigger: input, nodes: { a: { x: 'y' } } };
    const sources = [
      '$trigger.body.items.n',
      'body.items[n > 1]',
      '$nodes.a.x & "!"',
      '[$match(body.s, /order-([0-9]+)/i).groups[0]]',
      '$merge([$, { "ok": true }])',
      'nothing.here',
      '$string(body)',
    ];
    try {
      for (const source of sources) {
        const expected = await inline.evaluate('w@1', source, input, bindings);
        await expect(worker.evaluate('w@1', source, input, bindings), source).resolves.toEqual(
          expected,
        );
      }
      await expect(worker.evaluate('w@1', '$error("no")', input, bindings)).rejects.toThrow(
        'expression failed: no (D3137',
      );
      await expect(worker.evaluate('w@1', '$eval(body.s & "(")', input, bindings)).rejects.toThrow(
        /expression failed/,
      );
    } finally {
      await worker.close();
    }
  }, 20_000);

  it('a function registered on a compiled expression runs in this process', async () => {
    const cache = new ExpressionCache({ isolation: 'worker', pool: { size: 1 } });
    try {
      cache.compile('w@1', '$twice(2)').registerFunction('twice', (n: number) => n * 2);
      await expect(cache.evaluate('w@1', '$twice(2)', {}, {})).resolves.toBe(4);
    } finally {
      await cache.close();
    }
  });
});
