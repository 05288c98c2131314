// Idempotency-Key and a Workflow that discards the records of its succeeded executions
// (ADR 0041, amended 2026-11-28 (night)), embedded (in-process engine, memory stores).
// A waiting caller that leaves gives its key back with the execution's hint
// (webhook-routes.ts keepKeyOfLeftClient): its retry starts that same execution. Once
// that execution has succeeded and been discarded, the retry must not run it again:
// the store's tombstone says it ran, and the retry gets 410 execution-discarded, which
// the key then keeps. A retry before the end, after a failure (kept), or on a workflow
// that keeps its records, goes as before.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROBLEM_BASE } from '../../runtime/errors.ts';
import { eventually, sleep } from '../support/eventually.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { trigger, workflow } from '../support/manifests.ts';
import { startReceiver } from '../support/receiver.ts';

let rt: TestRuntime;
let base: string;
let receiver: Awaited<ReturnType<typeof startReceiver>>;

/** A pause (the caller leaves during it), a call the receiver counts, then the answer. */
const nodes = (url: string) => [
  { id: 'pause', type: 'delay', duration: '300ms' },
  { id: 'call', type: 'http', request: { method: 'POST', url } },
  {
    id: 'check',
    type: 'transform',
    expression: '$boolean($trigger.body.fail) ? $error("asked to") : { "n": $trigger.body.n }',
  },
  { id: 'answer', type: 'respond', statusCode: 200, expression: '$' },
];

beforeAll(async () => {
  receiver = await startReceiver();
  rt = await startRuntime({ engine: { outbound: { allow: [`127.0.0.1:${receiver.port}`] } } });
  base = await rt.app.listen({ port: 0, host: '127.0.0.1' });
  await rt.apply(
    'gone.yaml',
    [
      workflow('gone', {
        nodes: nodes(`${receiver.url}/gone`),
        executionRecords: { succeeded: 'Discard' },
      }),
      workflow('kept', { nodes: nodes(`${receiver.url}/kept`) }),
      ...['wait', 'node'].map((segment) =>
        trigger(segment, {
          workflowRef: { name: 'gone' },
          pathSegment: segment,
          response: { mode: segment === 'wait' ? 'waitForCompletion' : 'waitForResponseNode' },
        }),
      ),
      trigger('keep', {
        workflowRef: { name: 'kept' },
        pathSegment: 'keep',
        response: { mode: 'waitForCompletion' },
      }),
    ],
    ['wait', 'node', 'keep'],
  );
});
afterAll(async () => {
  await rt?.stop();
  await receiver?.close();
});

const post = (path: string, body: unknown, key: string, signal?: AbortSignal) =>
  fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify(body),
    ...(signal ? { signal } : {}),
  });

const GONE = '/webhook/default_production_gone';
const KEPT = '/webhook/default_production_kept/keep';

/** Posts and leaves once the execution runs (its caller got nothing: the key keeps the hint). */
async function leave(path: string, body: { n: number; fail?: true }, key: string): Promise<void> {
  const aborted = new AbortController();
  const left = post(path, body, key, aborted.signal).catch(() => undefined);
  await eventually(async () =>
    expect(await rt.engine.list({ status: 'running', limit: 100 })).not.toEqual([]),
  );
  aborted.abort();
  await left;
}

/** The calls the receiver got for `n` (each one run of the workflow). */
const runs = (what: string, n: number) =>
  receiver.received.filter(
    (r) => r.url === `/${what}` && (JSON.parse(r.body) as { body?: { n?: number } }).body?.n === n,
  ).length;

const idle = () =>
  eventually(async () => {
    expect(await rt.engine.list({ status: 'running', limit: 10 })).toEqual([]);
    expect(await rt.engine.list({ status: 'queued', limit: 10 })).toEqual([]);
    expect(rt.engine.running + rt.engine.queued).toBe(0);
  });

describe('Idempotency-Key retried after its execution succeeded and was discarded (embedded)', () => {
  for (const segment of ['wait', 'node'])
    it(`${segment}: the retry is not run again; it and every later retry get 410 execution-discarded`, async () => {
      const n = segment === 'wait' ? 1 : 2;
      await leave(`${GONE}/${segment}`, { n }, `order-${n}`);
      await idle();
      expect(runs('gone', n)).toBe(1);

      const retried = await post(`${GONE}/${segment}`, { n }, `order-${n}`);
      await idle();
      expect(runs('gone', n)).toBe(1);
      expect(retried.status).toBe(410);
      expect(retried.headers.get('content-type')).toContain('application/problem+json');
      const problem = (await retried.json()) as { type: string; executionId: string };
      expect(problem.type).toBe(`${PROBLEM_BASE}execution-discarded`);
      expect(problem.executionId).toEqual(expect.any(String));
      // Nothing of it is readable: the tombstone is no record.
      expect(await rt.engine.get(problem.executionId)).toBeUndefined();
      expect(
        (await rt.engine.list({ limit: 100 })).filter((e) => e.id === problem.executionId),
      ).toEqual([]);

      const again = await post(`${GONE}/${segment}`, { n }, `order-${n}`);
      expect(again.status).toBe(410);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(((await again.json()) as { executionId: string }).executionId).toBe(
        problem.executionId,
      );
      expect(runs('gone', n)).toBe(1);
    });

  it('a retry before the run has finished waits for that same run: 200 with its output, one run', async () => {
    await leave(`${GONE}/wait`, { n: 3 }, 'order-3');
    const retried = await post(`${GONE}/wait`, { n: 3 }, 'order-3');
    expect(retried.status).toBe(200);
    await idle();
    expect(runs('gone', 3)).toBe(1);
  });

  it('a retry after a failed run gets its failure (the record is kept), not a second run', async () => {
    await leave(`${GONE}/wait`, { n: 4, fail: true }, 'order-4');
    await idle();
    const retried = await post(`${GONE}/wait`, { n: 4, fail: true }, 'order-4');
    expect(retried.status).toBe(500);
    expect(((await retried.json()) as { type: string }).type).toBe(
      `${PROBLEM_BASE}execution-failed`,
    );
    await sleep(50);
    expect(runs('gone', 4)).toBe(1);
  });

  it('a workflow that keeps its records: the retry gets the output of the kept record, one run', async () => {
    await leave(KEPT, { n: 5 }, 'order-5');
    await idle();
    const retried = await post(KEPT, { n: 5 }, 'order-5');
    expect(retried.status).toBe(200);
    await sleep(50);
    expect(runs('kept', 5)).toBe(1);
  });
});
