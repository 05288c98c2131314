// Idempotency-Key edge cases found by a bad-input probe: a waiting caller that left
// before its answer (the retry ran the workflow a second time once the claim's lease
// ran out, and got 409 until then), two consumers sending the same key (one got the
// other's answer), and a waiting caller answered 408 (the retry got that 408 again for
// the key's window, never the result).
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, sleep } from '../support/eventually.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { secret, trigger, workflow } from '../support/manifests.ts';

let rt: TestRuntime;
let base: string;
const wf = '/webhook/default_production_';

beforeAll(async () => {
  rt = await startRuntime();
  base = await rt.app.listen({ port: 0, host: '127.0.0.1' });
  await rt.apply(
    'idempotency.yaml',
    [
      secret('keys', { acme: 'key-acme-123456', globex: 'key-globex-123456' }),
      workflow('slow', {
        nodes: [
          { id: 'pause', type: 'delay', duration: '400ms' },
          { id: 'out', type: 'transform', expression: '{ "done": body.n }' },
        ],
      }),
      workflow('slower', {
        nodes: [
          { id: 'pause', type: 'delay', duration: '1600ms' },
          { id: 'out', type: 'transform', expression: '{ "done": body.n }' },
        ],
      }),
      workflow('echo', {
        nodes: [{ id: 'out', type: 'transform', expression: '{ "customer": metadata.consumer }' }],
      }),
      trigger('wait', {
        workflowRef: { name: 'slow' },
        pathSegment: 'wait',
        timeout: '10s',
        response: { mode: 'waitForCompletion' },
      }),
      trigger('brief', {
        workflowRef: { name: 'slower' },
        pathSegment: 'brief',
        timeout: '1s',
        response: { mode: 'waitForCompletion' },
      }),
      trigger('keyed', {
        workflowRef: { name: 'echo' },
        pathSegment: 'keyed',
        auth: { method: 'apiKey', apiKey: { secretRef: { name: 'keys' } } },
        response: { mode: 'waitForCompletion' },
      }),
    ],
    ['wait', 'brief', 'keyed'],
  );
});
afterAll(async () => {
  await rt.stop();
});

/** A POST whose client leaves after `leaveAfterMs`, before any answer. */
function postAndLeave(url: string, body: string, key: string, leaveAfterMs: number) {
  return new Promise<void>((resolve) => {
    const req = httpRequest(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
    });
    req.on('error', () => resolve());
    req.end(body);
    setTimeout(() => {
      req.destroy();
      resolve();
    }, leaveAfterMs);
  });
}

describe('Idempotency-Key', () => {
  it('a waiting caller that left: the retry gets that execution’s answer, not a second run', async () => {
    const url = `${base}${wf}slow/wait`;
    await postAndLeave(url, '{"n":1}', 'left-1', 100);
    // The retry right away waits for the same execution (409 before, for the
    // endpoint's timeout and 5 s)...
    const retry = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': 'left-1' },
      body: '{"n":1}',
    });
    expect(retry.status).toBe(200);
    expect(await retry.json()).toEqual({ done: 1 });
    // ...and one after it ended gets its answer again.
    await sleep(50);
    const later = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': 'left-1' },
      body: '{"n":1}',
    });
    expect(later.status).toBe(200);
    expect(await later.json()).toEqual({ done: 1 });
    const runs = await rt.engine.list({ triggerKey: 'default/wait', limit: 10 });
    expect(runs).toHaveLength(1);
    expect(runs[0]?.status).toBe('succeeded');
  });

  it('a caller that left and never came back: its execution ends once, the key then replays it', async () => {
    const url = `${base}${wf}slow/wait`;
    await postAndLeave(url, '{"n":2}', 'left-2', 100);
    await eventually(async () => {
      const [run] = await rt.engine.list({ triggerKey: 'default/wait', limit: 1 });
      expect(run?.status).toBe('succeeded');
    });
    const retry = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': 'left-2' },
      body: '{"n":2}',
    });
    expect(retry.status).toBe(200);
    expect(await retry.json()).toEqual({ done: 2 });
    const runs = await rt.engine.list({ triggerKey: 'default/wait', limit: 10 });
    expect(runs.filter((r) => (r.input.body as { n?: number }).n === 2)).toHaveLength(1);
  });

  it('a 408 (the workflow outlasts the timeout) is no final answer: the retry waits for the same execution', async () => {
    const url = `${base}${wf}slower/brief`;
    const send = () =>
      fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': 'timeout-1' },
        body: '{"n":7}',
      });
    const first = await send();
    expect(first.status).toBe(408);
    const { executionId } = (await first.json()) as { executionId: string };
    // Before 2026-11-28 the 408 was the key's answer, replayed for the key's window.
    const retry = await send();
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBeNull();
    expect(await retry.json()).toEqual({ done: 7 });
    const later = await send();
    expect(later.headers.get('idempotent-replayed')).toBe('true');
    expect(await later.json()).toEqual({ done: 7 });
    const runs = await rt.engine.list({ triggerKey: 'default/brief', limit: 10 });
    expect(runs.map((r) => [r.id, r.status])).toEqual([[executionId, 'succeeded']]);
  });

  it('is kept per consumer: the same key from two API keys runs twice, each gets its own answer', async () => {
    const url = `${base}${wf}echo/keyed`;
    const send = (apiKey: string) =>
      fetch(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'idempotency-key': 'order-1001',
          'x-api-key': apiKey,
        },
        body: '{"order":1001}',
      });
    const acme = await send('key-acme-123456');
    expect(acme.status).toBe(200);
    expect(await acme.json()).toEqual({ customer: 'acme' });
    const globex = await send('key-globex-123456');
    expect(globex.status).toBe(200);
    expect(globex.headers.get('idempotent-replayed')).toBeNull();
    expect(await globex.json()).toEqual({ customer: 'globex' });
    // Each one's own retry is still a replay.
    const again = await send('key-acme-123456');
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await again.json()).toEqual({ customer: 'acme' });
  });
});
