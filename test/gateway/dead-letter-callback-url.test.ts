// A dead letter's callback URL is the caller's, and often carries the receiver's token
// (docs/callbacks.md): the stored request, the workflow's input and the live stream read
// [redacted] there, and so does the dead-letter list on the admin listener, which anyone
// who may read the trigger reads. The entry keeps the URL itself: a retry still delivers
// to it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeadLetter } from '../../runtime/engine/dead-letters.ts';
import { startReceiver, type Receiver } from '../engine/receiver.ts';
import { eventually } from '../support/eventually.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { trigger, workflow } from '../support/manifests.ts';

let rt: TestRuntime;
let receiver: Receiver;
const PATH = '/webhook/default_production_doomed/late';

beforeAll(async () => {
  receiver = await startReceiver(() => ({ status: 200 }));
  rt = await startRuntime({
    engine: {
      outbound: { allow: [`127.0.0.1:${receiver.port}`] },
      callbacks: { backoffMs: 1, timeoutMs: 2000, maxAttempts: 1 },
    },
  });
  await rt.apply(
    'late.yaml',
    [
      workflow('doomed', {
        nodes: [{ id: 'stop', type: 'fail', expression: '"down"', statusCode: 502 }],
        retry: { attempts: 1, backoff: { initial: '10ms' }, on: ['fail'] },
      }),
      trigger('late', {
        workflowRef: { name: 'doomed' },
        pathSegment: 'late',
        response: { mode: 'asyncCallback' },
      }),
    ],
    ['late'],
  );
});
afterAll(async () => {
  await rt?.stop();
  await receiver?.close();
});

/** Callbacks the receiver got for execution `id`, by the path they were posted to. */
const callbackPaths = (id: string) =>
  receiver.received
    .filter((r) => (JSON.parse(r.body) as { executionId?: string }).executionId === id)
    .map((r) => r.url);

describe("the dead-letter list does not show the caller's callback URL", () => {
  it('lists and reads the entry with callbackUrl [redacted]; its retry still calls back there', async () => {
    const url = `${receiver.url}/hooks/s3cr3t-path-token?sig=s3cr3t-query-token`;
    const res = await rt.app.inject({
      method: 'POST',
      url: PATH,
      headers: { 'content-type': 'application/json', 'x-callback-url': url },
      payload: '{"orderId":1}',
    });
    expect(res.statusCode, res.body).toBe(202);
    const { executionId } = res.json<{ executionId: string }>();
    const one = await eventually(async () => {
      const got = await rt.admin.inject({ url: `/api/dead-letters/${executionId}` });
      expect(got.statusCode, got.body).toBe(200);
      return got;
    });
    const list = await rt.admin.inject({ url: '/api/dead-letters?trigger=default/late' });
    expect(list.statusCode, list.body).toBe(200);
    for (const body of [one.body, list.body]) expect(body).not.toContain('s3cr3t');
    expect(one.json<DeadLetter>().callbackUrl).toBe('[redacted]');
    expect(list.json<{ items: DeadLetter[] }>().items[0]?.callbackUrl).toBe('[redacted]');

    const retried = await rt.admin.inject({
      method: 'POST',
      url: `/api/dead-letters/${executionId}/retry`,
    });
    expect(retried.statusCode, retried.body).toBe(202);
    const run = retried.json<{ executionId: string }>().executionId;
    await eventually(() =>
      expect(callbackPaths(run)).toEqual(['/hooks/s3cr3t-path-token?sig=s3cr3t-query-token']),
    );
  });
});
