// An Idempotency-Key whose request was refused before any execution started (the
// engine's queue full, the engine shutting down) is given back: the caller was told to
// retry (503 + Retry-After), so its retry runs, instead of getting the refusal replayed
// for the key's whole window. Once an execution has started, its answer is the key's,
// errors included (a failed Wait for Completion is replayed, not run again).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROBLEM_BASE } from '../../runtime/errors.ts';
import { eventually } from '../support/eventually.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { trigger, workflow } from '../support/manifests.ts';

let rt: TestRuntime;
let base: string;
const wf = '/webhook/default_production_slow';

beforeAll(async () => {
  // One execution at a time and one waiting: a third is refused while both are there.
  rt = await startRuntime({ engine: { concurrency: 1, maxQueued: 1 } });
  base = await rt.app.listen({ port: 0, host: '127.0.0.1' });
  await rt.apply(
    'slow.yaml',
    [
      workflow('slow', {
        nodes: [
          { id: 'pause', type: 'delay', duration: '200ms' },
          {
            id: 'check',
            type: 'transform',
            expression: '$boolean(body.fail) ? $error("asked to") : body',
          },
        ],
      }),
      trigger('ack', { workflowRef: { name: 'slow' }, pathSegment: 'ack' }),
      trigger('wait', {
        workflowRef: { name: 'slow' },
        pathSegment: 'wait',
        response: { mode: 'waitForCompletion' },
      }),
    ],
    ['ack', 'wait'],
  );
});
afterAll(async () => {
  await rt.stop();
});

const post = (segment: string, body: unknown, key?: string) =>
  fetch(`${base}${wf}/${segment}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(key === undefined ? {} : { 'idempotency-key': key }),
    },
    body: JSON.stringify(body),
  });

const idle = () =>
  eventually(async () => {
    const busy = await rt.engine.list({ status: 'queued', limit: 10 });
    const running = await rt.engine.list({ status: 'running', limit: 10 });
    expect(busy.length + running.length).toBe(0);
  });

describe('Idempotency-Key and refusals', () => {
  it('a request refused because the queue is full keeps no answer under its key: the retry runs, then is replayed', async () => {
    const accepted = await Promise.all([post('ack', { n: 1 }), post('ack', { n: 2 })]);
    expect(accepted.map((r) => r.status)).toEqual([202, 202]);
    const refused = await post('ack', { n: 3 }, 'order-3');
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).not.toBeNull();
    expect(((await refused.json()) as { type: string }).type).toBe(
      `${PROBLEM_BASE}engine-overloaded`,
    );
    await idle();

    const retried = await post('ack', { n: 3 }, 'order-3');
    expect(retried.status).toBe(202);
    expect(retried.headers.get('idempotent-replayed')).toBeNull();
    const { executionId } = (await retried.json()) as { executionId: string };
    const again = await post('ack', { n: 3 }, 'order-3');
    expect(again.status).toBe(202);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(((await again.json()) as { executionId: string }).executionId).toBe(executionId);
    await idle();
    const runs = (await rt.engine.list({ triggerKey: 'default/ack', limit: 100 })).filter(
      (e) => (e.input.body as { n: number }).n === 3,
    );
    expect(runs.map((e) => e.id)).toEqual([executionId]);
  });

  it("an execution that started and failed is the key's answer: replayed, not run again", async () => {
    await idle();
    const failed = await post('wait', { n: 4, fail: true }, 'order-4');
    expect(failed.status).toBeGreaterThanOrEqual(500);
    const problem = (await failed.json()) as { type: string };
    const again = await post('wait', { n: 4, fail: true }, 'order-4');
    expect(again.status).toBe(failed.status);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(((await again.json()) as { type: string }).type).toBe(problem.type);
    const runs = (await rt.engine.list({ triggerKey: 'default/wait', limit: 100 })).filter(
      (e) => (e.input.body as { n: number }).n === 4,
    );
    expect(runs).toHaveLength(1);
  });
});
