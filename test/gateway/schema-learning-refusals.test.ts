// Schema learning samples only what the gateway accepted: a request refused after its
// body passed the input check (an SSE Stream refused 503 streams-exhausted before its
// execution starts, an Async Callback request without a usable callback URL) started
// nothing, and its body is not a sample. Otherwise a caller could fill a trigger's
// samples (and so its proposal) with requests the gateway never served. Over real HTTP:
// the SSE Stream holds a process stream slot.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../support/eventually.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { trigger, workflow } from '../support/manifests.ts';

let rt: TestRuntime;
let base: string;
const wf = '/webhook/default_production_slow';
const learning = { mode: 'automatic', input: {}, output: {}, learning: { enabled: true } };
const open = new Set<AbortController>();

beforeAll(async () => {
  // One stream in the whole process: a second SSE Stream request is refused.
  rt = await startRuntime({ budgets: { streamsPerProcess: 1 } });
  base = await rt.app.listen({ port: 0, host: '127.0.0.1' });
  await rt.apply(
    'slow.yaml',
    [
      workflow('slow', { nodes: [{ id: 'wait', type: 'delay', duration: '5s' }] }),
      trigger('stream', {
        workflowRef: { name: 'slow' },
        pathSegment: 'notify',
        response: { mode: 'sseStream' },
        schema: learning,
      }),
      trigger('callback', {
        workflowRef: { name: 'slow' },
        pathSegment: 'callback',
        response: { mode: 'asyncCallback' },
        schema: learning,
      }),
    ],
    ['stream', 'callback'],
  );
});
afterAll(async () => {
  for (const controller of open) controller.abort();
  await rt.stop();
});

/** The keys of the request bodies sampled, as the proposal shows them. */
async function sampled(name: string): Promise<{ requests: number; keys: string[] }> {
  const res = await rt.admin.inject({ url: `/api/triggers/default/${name}/schema-proposal` });
  expect(res.statusCode, res.body).toBe(200);
  const proposal = res.json<{
    samples: { requests: number };
    input: { properties?: Record<string, unknown> } | null;
  }>();
  return {
    requests: proposal.samples.requests,
    keys: Object.keys(proposal.input?.properties ?? {}),
  };
}

async function post(path: string, body: unknown): Promise<Response> {
  const controller = new AbortController();
  const res = await fetch(`${base}${wf}/${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: controller.signal,
  });
  if (res.status === 200) open.add(controller);
  else await res.text();
  return res;
}

describe('schema learning samples only accepted requests', () => {
  it('an SSE Stream refused 503 streams-exhausted is not a sample; the stream it made room for is', async () => {
    const served = await post('notify', { accepted: 1 });
    expect(served.status).toBe(200);
    const refused = await post('notify', { refused: 1 });
    expect(refused.status).toBe(503);
    expect(refused.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    await eventually(async () => {
      expect(await sampled('stream')).toEqual({ requests: 1, keys: ['accepted'] });
    });
    // Recording is not awaited: give a wrongly recorded sample the time to land.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await sampled('stream')).toEqual({ requests: 1, keys: ['accepted'] });
  });

  it('an Async Callback request without a usable callback URL is not a sample', async () => {
    const missing = await post('callback', { missing: 1 });
    expect(missing.status).toBe(400);
    const refused = await fetch(
      `${base}${wf}/callback?callbackUrl=${encodeURIComponent('http://127.0.0.1:1/x')}`,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ refused: 1 }),
      },
    );
    expect(refused.status).toBe(400);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await sampled('callback')).toEqual({ requests: 0, keys: [] });
  });
});
