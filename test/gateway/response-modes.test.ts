// The six response modes over real HTTP on loopback: status codes per the spec's
// table, body shapes, event order, 204 without a body, custom headers present.
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROBLEM_BASE } from '../../runtime/errors.ts';
import { eventually, sleep } from '../support/eventually.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { trigger, workflow } from '../support/manifests.ts';
import { startReceiver } from '../support/receiver.ts';
import { collect } from '../support/sse.ts';

let rt: TestRuntime;
let base: string;
/** The admin listener: execution events and the live stream. */
let adminBase: string;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const wf = '/webhook/default_production_steps';
const custom = { custom: [{ name: 'X-Api-Version', value: '7' }] };
const internalErrors: string[] = [];

beforeAll(async () => {
  receiver = await startReceiver((r, n) => (r.url.startsWith('/gone') ? 410 : n === 1 ? 500 : 200));
  rt = await startRuntime({
    engine: {
      onInternalError: (error, where) => internalErrors.push(`${where}: ${String(error)}`),
      outbound: { allow: [`127.0.0.1:${receiver.port}`] },
      callbacks: { secret: SECRET, backoffMs: 20, timeoutMs: 2000 },
    },
    heartbeatMs: 200,
  });
  base = await rt.app.listen({ port: 0, host: '127.0.0.1' });
  adminBase = await rt.admin.listen({ port: 0, host: '127.0.0.1' });
  await rt.apply(
    'modes.yaml',
    [
      workflow('steps', {
        nodes: [
          { id: 'first', type: 'transform', expression: '{ "n": body.n }' },
          {
            id: 'answer',
            type: 'respond',
            statusCode: 201,
            headers: { 'X-From-Node': 'yes' },
            expression: '{ "accepted": n }',
          },
          { id: 'pause', type: 'delay', duration: '150ms' },
          { id: 'last', type: 'transform', expression: '{ "n": $nodes.first.n, "done": true }' },
        ],
      }),
      ...(
        [
          ['ack', 'immediateAck', {}],
          ['callback', 'asyncCallback', {}],
          ['subscribe', 'ackSubscribe', {}],
          ['wait', 'waitForCompletion', {}],
          ['stream', 'sseStream', {}],
          ['node', 'waitForResponseNode', {}],
          ['node-empty', 'waitForResponseNode', { statusCode: 204 }],
          ['text', 'waitForCompletion', { contentType: 'text/plain' }],
          ['xml', 'waitForCompletion', { contentType: 'application/xml' }],
          ['html', 'waitForResponseNode', { contentType: 'text/html; charset=utf-8' }],
        ] as const
      ).map(([segment, mode, extra]) =>
        trigger(segment, {
          workflowRef: { name: 'steps' },
          pathSegment: segment,
          response: { mode, headers: custom, ...extra },
        }),
      ),
    ],
    ['ack', 'callback', 'subscribe', 'wait', 'stream', 'node', 'node-empty', 'text', 'xml', 'html'],
  );
});
afterAll(async () => {
  await rt.stop();
  await receiver.close();
});

const post = (segment: string, body: unknown = { n: 5 }, headers: Record<string, string> = {}) =>
  fetch(`${base}${wf}/${segment}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });

async function finished(id: string) {
  return eventually(async () => {
    const e = await rt.engine.get(id);
    if (e?.status !== 'succeeded' && e?.status !== 'failed') throw new Error(`still ${e?.status}`);
    return e;
  });
}

describe('partial modes (202)', () => {
  it('Immediate ACK: 202 at once with the execution handle; the run goes on', async () => {
    const res = await post('ack');
    expect(res.status).toBe(202);
    expect(res.headers.get('x-api-version')).toBe('7');
    const body = (await res.json()) as {
      executionId: string;
      status: string;
      links: Record<string, string>;
    };
    expect(body).toEqual({
      executionId: expect.any(String),
      status: 'queued',
      links: {
        self: expect.stringMatching(
          new RegExp(`^/webhook-executions/${body.executionId}\\?token=[A-Za-z0-9_-]{43}$`),
        ),
        events: expect.stringMatching(
          new RegExp(`^/webhook-executions/${body.executionId}/events\\?token=[A-Za-z0-9_-]{43}$`),
        ),
      },
    });
    expect(res.headers.get('location')).toBe(body.links.self);
    expect((await finished(body.executionId)).output).toEqual({ n: 5, done: true });
  });

  it('Async Callback: 202, then a signed POST of the result, retried with the same id', async () => {
    const res = await post('callback', { n: 9 }, { 'x-callback-url': `${receiver.url}/hook` });
    expect(res.status).toBe(202);
    const body = (await res.json()) as { executionId: string; callbackUrl: string };
    expect(body.callbackUrl).toBe(`${receiver.url}/hook`);
    const deliveries = await eventually(() => {
      const got = receiver.received.filter((r) => r.body.includes(body.executionId));
      if (got.length < 2) throw new Error(`${got.length} deliveries`);
      return got;
    });
    expect(deliveries[0]?.headers['webhook-id']).toBe(deliveries[1]?.headers['webhook-id']);
    const last = deliveries[1] as (typeof deliveries)[number];
    const verified = new Webhook(SECRET).verify(last.body, {
      'webhook-id': String(last.headers['webhook-id']),
      'webhook-timestamp': String(last.headers['webhook-timestamp']),
      'webhook-signature': String(last.headers['webhook-signature']),
    }) as { executionId: string; status: string; output: unknown };
    expect(verified).toMatchObject({
      executionId: body.executionId,
      status: 'succeeded',
      output: { n: 9, done: true },
    });
  });

  it('Async Callback: the URL may come as a query parameter', async () => {
    const res = await fetch(
      `${base}${wf}/callback?callbackUrl=${encodeURIComponent(`${receiver.url}/q`)}`,
      { method: 'POST' },
    );
    expect(res.status).toBe(202);
  });

  it('Async Callback: a callbackUrl given twice is refused, not called missing', async () => {
    const url = encodeURIComponent(`${receiver.url}/q`);
    const res = await fetch(`${base}${wf}/callback?callbackUrl=${url}&callbackUrl=${url}`, {
      method: 'POST',
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { type: string }).type).toBe(
      `${PROBLEM_BASE}callback-url-refused`,
    );
  });

  it('Async Callback: the URL is not stored, and a failed delivery is no internal error', async () => {
    const secretUrl = `${receiver.url}/hook?token=receiver-secret-1`;
    const byHeader = await post('callback', { n: 2 }, { 'x-callback-url': secretUrl });
    const byQuery = await fetch(
      `${base}${wf}/callback?callbackUrl=${encodeURIComponent(secretUrl)}&keep=1`,
      { method: 'POST' },
    );
    // The receiver answers 410 Gone: not delivered, not retried.
    const refused = await post('callback', { n: 3 }, { 'x-callback-url': `${receiver.url}/gone` });
    for (const res of [byHeader, byQuery, refused]) expect(res.status).toBe(202);
    const [a, b, c] = await Promise.all(
      [byHeader, byQuery, refused].map(async (r) => (await r.json()) as { executionId: string }),
    );
    const stored = await Promise.all(
      [a, b].map((x) => finished((x as { executionId: string }).executionId)),
    );
    expect(stored[0]?.input.headers['x-callback-url']).toBe('[redacted]');
    expect(stored[1]?.input.query).toEqual({ callbackUrl: '[redacted]', keep: '1' });
    expect(JSON.stringify(stored)).not.toContain('receiver-secret-1');
    await eventually(async () => {
      const record = await rt.engine.get((c as { executionId: string }).executionId);
      expect(record?.callback?.delivered).toBe(false);
    });
    expect(internalErrors).toEqual([]);
  });

  it.each([
    ['missing', undefined, 'callback-url-missing'],
    ['plain http to a private address', 'http://10.0.0.1/hook', 'callback-url-refused'],
    ['the metadata address', 'https://169.254.169.254/latest', 'callback-url-refused'],
    ['loopback by IPv6', 'https://[::1]/x', 'callback-url-refused'],
    ['IPv4-mapped loopback', 'https://[::ffff:127.0.0.1]/x', 'callback-url-refused'],
    ['decimal loopback', 'https://2130706433/x', 'callback-url-refused'],
    ['not a URL', 'hook me', 'callback-url-refused'],
  ])('Async Callback: a %s callback URL is refused before anything runs', async (_n, url, type) => {
    const before = (await rt.engine.list({ triggerKey: 'default/callback', limit: 1000 })).length;
    const res = await post('callback', { n: 1 }, url ? { 'x-callback-url': url } : {});
    expect(res.status).toBe(400);
    expect(((await res.json()) as { type: string }).type).toBe(PROBLEM_BASE + type);
    expect((await rt.engine.list({ triggerKey: 'default/callback', limit: 1000 })).length).toBe(
      before,
    );
  });

  it('Acknowledge + Subscribe: 202 with a channel; the channel streams progress in order', async () => {
    const res = await post('subscribe');
    expect(res.status).toBe(202);
    const body = (await res.json()) as {
      executionId: string;
      channel: { type: string; url: string };
    };
    expect(body.channel).toEqual({
      type: 'sse',
      url: expect.stringMatching(new RegExp(`^/webhook-executions/${body.executionId}/events\\?`)),
    });
    // On the webhook listener, with no admin token: the link's own token is enough.
    const channel = await fetch(`${base}${body.channel.url}`);
    expect(channel.status).toBe(200);
    expect(channel.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const frames = await collect(channel);
    const types = frames.map((f) => f.event);
    expect(types[0]).toBe('queued');
    expect(types.at(-1)).toBe('completed');
    expect(types).toEqual(expect.arrayContaining(['node.started', 'node.finished', 'respond']));
    expect(frames.map((f) => Number(f.id))).toEqual(frames.map((_f, i) => i + 1));
    expect(JSON.parse(frames.at(-1)?.data ?? '{}')).toMatchObject({
      type: 'completed',
      output: { n: 5, done: true },
    });
  });

  it('Acknowledge + Subscribe: Last-Event-ID resumes after that event; a late subscriber gets the replay', async () => {
    const res = await post('subscribe');
    const { executionId, channel } = (await res.json()) as {
      executionId: string;
      channel: { url: string };
    };
    await finished(executionId);
    const all = await collect(await fetch(`${base}${channel.url}`));
    const resumed = await collect(
      await fetch(`${base}${channel.url}`, { headers: { 'last-event-id': '3' } }),
    );
    expect(resumed.map((f) => f.id)).toEqual(all.slice(3).map((f) => f.id));
    expect(resumed[0]?.id).toBe('4');
    // The admin channel of the same execution agrees.
    const admin = await collect(await fetch(`${adminBase}/api/executions/${executionId}/events`));
    expect(admin.map((f) => f.id)).toEqual(all.map((f) => f.id));
  });
});

describe('complete modes (200)', () => {
  it('Wait for Completion: 200 with the final output and the custom headers', async () => {
    const res = await post('wait');
    expect(res.status).toBe(200);
    expect(res.headers.get('x-api-version')).toBe('7');
    expect(await res.json()).toEqual({ n: 5, done: true });
  });

  it('Wait for Completion with text/plain sends the output as key: value lines', async () => {
    const res = await post('text');
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(await res.text()).toBe('n: 5\ndone: true\n');
  });

  it('Wait for Completion with application/xml sends the output as an XML document', async () => {
    const res = await post('xml');
    expect(res.headers.get('content-type')).toMatch(/^application\/xml/);
    expect(await res.text()).toBe(
      '<?xml version="1.0" encoding="UTF-8"?>\n<response><n>5</n><done>true</done></response>',
    );
  });

  it('a respond node with text/html answers an escaped definition list', async () => {
    const res = await post('html', { n: '<b>' });
    expect(res.status).toBe(201);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(await res.text()).toBe('<dl><dt>accepted</dt><dd>&lt;b&gt;</dd></dl>');
  });

  it('SSE Stream: 200 event stream with proxy-safe headers, progress until the result', async () => {
    const res = await post('stream');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(res.headers.get('x-accel-buffering')).toBe('no');
    expect(res.headers.get('cache-control')).toMatch(/no-cache/);
    const frames = await collect(res);
    const types = frames.map((f) => f.event);
    expect(types[0]).toBe('queued');
    expect(types.indexOf('respond')).toBeLessThan(types.indexOf('completed'));
    expect(types.at(-1)).toBe('completed');
  });

  it('SSE Stream: a client that leaves early leaks nothing and the run still finishes', async () => {
    const controller = new AbortController();
    const res = await fetch(`${base}${wf}/stream`, {
      method: 'POST',
      body: '{"n":1}',
      headers: { 'content-type': 'application/json' },
      signal: controller.signal,
    });
    const location = res.headers.get('location') as string;
    const id = new URL(location, base).pathname.split('/').pop() as string;
    controller.abort();
    const done = await finished(id);
    expect(done.status).toBe('succeeded');
    await eventually(() => expect(rt.engine.listenerCount(id)).toBe(0));
  });

  it('Wait for Response Node: the respond node sets status, headers and body; the workflow goes on', async () => {
    const res = await post('node');
    expect(res.status).toBe(201);
    expect(res.headers.get('x-from-node')).toBe('yes');
    expect(res.headers.get('x-api-version')).toBe('7');
    expect(await res.json()).toEqual({ accepted: 5 });
    const id = (await rt.engine.list({ triggerKey: 'default/node', limit: 1 }))[0]?.id as string;
    const done = await finished(id);
    expect(done.log.map((l) => l.nodeId)).toEqual(['first', 'answer', 'pause', 'last']);
  });

  it('Wait for Response Node with 204 configured: no body', async () => {
    const res = await post('node-empty');
    expect(res.status).toBe(204);
    expect(await res.text()).toBe('');
  });
});

describe('Idempotency-Key', () => {
  it('the same key and body, sent concurrently, run once; retries get the same answer', async () => {
    const key = `k-${Date.now()}`;
    const results = await Promise.all(
      Array.from({ length: 8 }, () => post('wait', { n: 3 }, { 'idempotency-key': key })),
    );
    const statuses = results.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(1);
    expect(statuses.every((s) => s === 200 || s === 409)).toBe(true);
    const again = await post('wait', { n: 3 }, { 'idempotency-key': key });
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await again.json()).toEqual({ n: 3, done: true });
    const runs = (await rt.engine.list({ triggerKey: 'default/wait', limit: 1000 })).filter(
      (e) => (e.input.body as { n: number }).n === 3,
    );
    expect(runs).toHaveLength(1);
  });

  it('a replayed 202 names the same execution', async () => {
    const first = (await (
      await post('ack', { n: 4 }, { 'idempotency-key': 'ack-once' })
    ).json()) as { executionId: string };
    const second = await post('ack', { n: 4 }, { 'idempotency-key': 'ack-once' });
    expect(((await second.json()) as { executionId: string }).executionId).toBe(first.executionId);
  });

  it('a retried SSE Stream gets a handle whose links work on the webhook listener', async () => {
    const first = await post('stream', { n: 2 }, { 'idempotency-key': 'stream-once' });
    await collect(first);
    const again = await post('stream', { n: 2 }, { 'idempotency-key': 'stream-once' });
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    const handle = (await again.json()) as { executionId: string; links: { self: string } };
    expect(handle.links.self).toMatch(/^\/webhook-executions\/[^/?]+\?token=/);
    const view = await fetch(`${base}${handle.links.self}`);
    expect(await view.json()).toMatchObject({ executionId: handle.executionId });
  });

  it('the same key with a different body → 422', async () => {
    await post('ack', { n: 1 }, { 'idempotency-key': 'reused' });
    const res = await post('ack', { n: 2 }, { 'idempotency-key': 'reused' });
    expect(res.status).toBe(422);
    expect(((await res.json()) as { type: string }).type).toBe(
      `${PROBLEM_BASE}idempotency-key-reused`,
    );
  });

  it('the same key while the first is still running → 409', async () => {
    const first = post('wait', { n: 8 }, { 'idempotency-key': 'busy' });
    await eventually(async () =>
      expect(
        (await rt.engine.list({ triggerKey: 'default/wait', status: 'running' })).length,
      ).toBeGreaterThan(0),
    );
    const second = await post('wait', { n: 8 }, { 'idempotency-key': 'busy' });
    expect(second.status).toBe(409);
    expect((await first).status).toBe(200);
  });

  it('an empty key → 400', async () => {
    const res = await post('ack', { n: 1 }, { 'idempotency-key': '""' });
    expect(res.status).toBe(400);
  });
});

describe('live event stream', () => {
  it('streams connected, then request and response events for the monitored path, rejections included', async () => {
    const controller = new AbortController();
    const res = await fetch(`${adminBase}/webhook-events/default_production_steps/ack`, {
      signal: controller.signal,
    });
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const frames = collect(
      res,
      (f) => f.event === 'response' && f.data.includes('"statusCode":405'),
    );
    await new Promise((r) => setTimeout(r, 50));
    await post('ack', { n: 1 }, { 'x-correlation-id': 'live-1' });
    await fetch(`${base}${wf}/ack`, { method: 'DELETE' });
    const got = await frames;
    controller.abort();
    expect(got[0]?.event).toBe('connected');
    const parsed = got
      .slice(1)
      .map((f) => ({ event: f.event, ...(JSON.parse(f.data) as Record<string, unknown>) }));
    expect(parsed[0]).toMatchObject({ event: 'request', method: 'POST', correlationId: 'live-1' });
    expect(parsed[1]).toMatchObject({
      event: 'response',
      statusCode: 202,
      executionId: expect.any(String),
    });
    expect(parsed.at(-1)).toMatchObject({
      event: 'response',
      statusCode: 405,
      problem: 'HG_ERR_METHOD_NOT_ALLOWED',
    });
  });

  it('an unknown path → 404 problem', async () => {
    const res = await fetch(`${adminBase}/webhook-events/nope/x`);
    expect(res.status).toBe(404);
  });
});

// A workflow that discards the records of its succeeded executions (ADR 0041), in the
// embedded engine: waiting callers get the result from the running execution; then its
// link and the admin API answer 404.
describe('executionRecords.succeeded Discard', () => {
  const quick = '/webhook/default_production_quick';
  beforeAll(async () => {
    await rt.apply(
      'discard.yaml',
      [
        workflow('quick', {
          nodes: [{ id: 'only', type: 'transform', expression: '{ "n": body.n, "quick": true }' }],
          executionRecords: { succeeded: 'Discard' },
        }),
        ...(
          [
            ['dwait', 'waitForCompletion'],
            ['dstream', 'sseStream'],
          ] as const
        ).map(([segment, mode]) =>
          trigger(segment, {
            workflowRef: { name: 'quick' },
            pathSegment: segment,
            response: { mode },
          }),
        ),
        // A respond node on one branch only: a run down the other reaches none.
        workflow('branchy', {
          nodes: [
            { id: 'check', type: 'if', condition: 'body.answer', else: 'last' },
            { id: 'answer', type: 'respond', statusCode: 201, expression: '{ "answered": true }' },
            { id: 'last', type: 'transform', expression: '{ "n": $trigger.body.n }' },
          ],
          executionRecords: { succeeded: 'Discard' },
        }),
        trigger('dnode', {
          workflowRef: { name: 'branchy' },
          pathSegment: 'dnode',
          response: { mode: 'waitForResponseNode' },
        }),
      ],
      ['dwait', 'dstream', 'dnode'],
    );
  });
  const postQuick = (segment: string, body: unknown) =>
    fetch(`${base}${quick}/${segment}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  it('Wait for Completion: every caller gets its output; nothing is kept', async () => {
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, n) =>
        postQuick('dwait', { n }).then(async (r): Promise<[number, unknown]> => [
          r.status,
          await r.json(),
        ]),
      ),
    );
    expect(answers).toEqual(Array.from({ length: 10 }, (_, n) => [200, { n, quick: true }]));
    expect(await rt.engine.list({ triggerKey: 'default/dwait' })).toEqual([]);
  });

  it('Wait for Response Node, a run that reaches no respond node: its caller gets the 500, and the record, a success, is kept for debugging (ADR 0041, amended 2026-11-28 (day))', async () => {
    const branchy = (body: unknown) =>
      fetch(`${base}/webhook/default_production_branchy/dnode`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const res = await branchy({ n: 9, answer: false });
    expect(res.status).toBe(500);
    const problem = (await res.json()) as { detail: string; executionId: string };
    expect(problem.detail).toBe('The workflow finished without running a respond node');
    // Past its finishing write (a discard would have been done by then).
    await sleep(50);
    const kept = await fetch(`${adminBase}/api/executions/${problem.executionId}`);
    expect(kept.status).toBe(200);
    expect(await kept.json()).toMatchObject({ status: 'succeeded', output: { n: 9 } });
    // Down the branch with the respond node: answered, then discarded as before.
    const answered = await branchy({ n: 10, answer: true });
    expect(answered.status).toBe(201);
    expect(await answered.json()).toEqual({ answered: true });
    await sleep(50);
    expect(await rt.engine.list({ triggerKey: 'default/dnode' })).toHaveLength(1);
  });

  it('SSE Stream: the stream ends with the result; then its link and the admin API answer 404', async () => {
    const res = await postQuick('dstream', { n: 8 });
    expect(res.status).toBe(200);
    const link = res.headers.get('location') as string;
    const frames = await collect(res);
    expect(frames.map((f) => f.event)).toEqual([
      'queued',
      'node.started',
      'node.finished',
      'completed',
    ]);
    const end = JSON.parse(frames.at(-1)?.data ?? '{}') as { executionId: string; output: unknown };
    expect(end.output).toEqual({ n: 8, quick: true });
    await eventually(async () => {
      const res = await fetch(`${adminBase}/api/executions/${end.executionId}`);
      expect(res.status).toBe(404);
      expect(((await res.json()) as { type: string }).type).toBe(
        `${PROBLEM_BASE}execution-not-found`,
      );
    });
    const linked = await fetch(`${base}${link}`);
    expect(linked.status).toBe(404);
    expect(((await linked.json()) as { type: string }).type).toBe(
      `${PROBLEM_BASE}execution-link-not-found`,
    );
  });
});
