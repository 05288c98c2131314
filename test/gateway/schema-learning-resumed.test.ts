// Schema learning and Idempotency-Key retries (embedded): a request is one sample at
// most, taken when its execution starts. A retry that resumes the execution its first
// try asked for (the key's hint) is sampled when its own start created that execution
// (the first try was refused by the engine: a full queue), and not when it found it
// (the first try started it and was sampled then; its waiting caller left).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, sleep } from '../support/eventually.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { trigger, workflow } from '../support/manifests.ts';

let rt: TestRuntime;
let base: string;
const wf = '/webhook/default_production_slow';
const learning = { mode: 'automatic', input: {}, output: {}, learning: { enabled: true } };

beforeAll(async () => {
  // One execution at a time and one waiting: a third is refused while both are there.
  rt = await startRuntime({ engine: { concurrency: 1, maxQueued: 1 } });
  base = await rt.app.listen({ port: 0, host: '127.0.0.1' });
  await rt.apply(
    'slow.yaml',
    [
      // Long enough that the queue is still full when the third request comes, on a loaded machine.
      workflow('slow', { nodes: [{ id: 'pause', type: 'delay', duration: '1s' }] }),
      trigger('ack', { workflowRef: { name: 'slow' }, pathSegment: 'ack', schema: learning }),
      trigger('wait', {
        workflowRef: { name: 'slow' },
        pathSegment: 'wait',
        response: { mode: 'waitForCompletion' },
        schema: learning,
      }),
    ],
    ['ack', 'wait'],
  );
});
afterAll(async () => {
  await rt.stop();
});

const post = (segment: string, body: unknown, key?: string, signal?: AbortSignal) =>
  fetch(`${base}${wf}/${segment}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(key === undefined ? {} : { 'idempotency-key': key }),
    },
    body: JSON.stringify(body),
    ...(signal ? { signal } : {}),
  });

/** The request bodies sampled for a trigger, and their keys, as the proposal shows them. */
async function sampled(name: string): Promise<{ requests: number; keys: string[] }> {
  const res = await rt.admin.inject({ url: `/api/triggers/default/${name}/schema-proposal` });
  expect(res.statusCode, res.body).toBe(200);
  const proposal = res.json<{
    samples: { requests: number };
    input: { properties?: Record<string, unknown> } | null;
  }>();
  return {
    requests: proposal.samples.requests,
    keys: Object.keys(proposal.input?.properties ?? {}).sort(),
  };
}

const idle = () =>
  eventually(async () => {
    const queued = await rt.engine.list({ status: 'queued', limit: 10 });
    const running = await rt.engine.list({ status: 'running', limit: 10 });
    expect(queued.length + running.length).toBe(0);
  });

describe('schema learning samples a resumed request once, when its own start created the execution', () => {
  it('refused by a full queue, then retried with the key: the retry is the sample', async () => {
    const filled = await Promise.all([post('ack', { fill: 1 }), post('ack', { fill: 2 })]);
    expect(filled.map((r) => r.status)).toEqual([202, 202]);
    const refused = await post('ack', { resumed: 1 }, 'order-1');
    expect(refused.status).toBe(503);
    await idle();
    const retried = await post('ack', { resumed: 1 }, 'order-1');
    expect(retried.status).toBe(202);
    expect(retried.headers.get('idempotent-replayed')).toBeNull();
    await eventually(async () => {
      expect(await sampled('ack')).toEqual({ requests: 3, keys: ['fill', 'resumed'] });
    });
    // Replayed under its key: no sample more.
    const replayed = await post('ack', { resumed: 1 }, 'order-1');
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    await sleep(50);
    expect((await sampled('ack')).requests).toBe(3);
  });

  it('a waiting caller that left, retried with the key: the first try was the sample, the retry finds its execution', async () => {
    await idle();
    const aborted = new AbortController();
    const left = post('wait', { waited: 1 }, 'order-2', aborted.signal).catch(() => undefined);
    await eventually(async () =>
      expect(await rt.engine.list({ status: 'running', limit: 10 })).not.toEqual([]),
    );
    aborted.abort();
    await left;
    const retried = await post('wait', { waited: 1 }, 'order-2');
    expect(retried.status).toBe(200);
    await sleep(50);
    expect(await sampled('wait')).toEqual({ requests: 1, keys: ['waited'] });
  });
});
