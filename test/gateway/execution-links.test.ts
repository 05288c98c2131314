// The public execution links on the webhook listener: the caller follows them with the
// token it got in the 202, without an admin token; anything else is the same 404.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROBLEM_BASE } from '../../runtime/errors.ts';
import { eventually } from '../support/eventually.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { trigger, workflow } from '../support/manifests.ts';
import { collect } from '../support/sse.ts';

let rt: TestRuntime;
let base: string;
let adminBase: string;
const wf = '/webhook/default_production_linked';

interface Accepted {
  executionId: string;
  links: { self: string; events: string };
  channel?: { type: string; url: string };
}

beforeAll(async () => {
  rt = await startRuntime({ heartbeatMs: 200 });
  base = await rt.app.listen({ port: 0, host: '127.0.0.1' });
  adminBase = await rt.admin.listen({ port: 0, host: '127.0.0.1' });
  await rt.apply(
    'links.yaml',
    [
      workflow('linked', {
        nodes: [
          { id: 'first', type: 'transform', expression: '{ "n": body.n }' },
          { id: 'pause', type: 'delay', duration: '100ms' },
          { id: 'last', type: 'transform', expression: '{ "n": $nodes.first.n, "done": true }' },
        ],
      }),
      trigger('subscribe', {
        workflowRef: { name: 'linked' },
        pathSegment: 'subscribe',
        response: { mode: 'ackSubscribe' },
      }),
      trigger('browser', {
        workflowRef: { name: 'linked' },
        pathSegment: 'browser',
        response: { mode: 'ackSubscribe' },
        cors: { enabled: true, allowedOrigins: ['https://app.example.com'] },
      }),
    ],
    ['subscribe', 'browser'],
  );
});
afterAll(async () => {
  await rt.stop();
});

async function accept(segment = 'subscribe', n = 5): Promise<Accepted> {
  const res = await fetch(`${base}${wf}/${segment}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ n, secret: 'input-only' }),
  });
  expect(res.status).toBe(202);
  return (await res.json()) as Accepted;
}

const tokenOf = (link: string) => new URL(link, base).searchParams.get('token') as string;

async function finished(id: string) {
  return eventually(async () => {
    const e = await rt.engine.get(id);
    if (e?.status !== 'succeeded' && e?.status !== 'failed') throw new Error(`still ${e?.status}`);
    return e;
  });
}

describe('public execution links', () => {
  it('channel.url streams progress and the result to a caller without an admin token', async () => {
    const body = await accept();
    expect(body.channel?.url).toBe(body.links.events);
    const frames = await collect(await fetch(`${base}${body.channel?.url ?? ''}`));
    const types = frames.map((f) => f.event);
    expect(types[0]).toBe('queued');
    expect(types).toEqual(expect.arrayContaining(['node.started', 'node.finished']));
    expect(types.at(-1)).toBe('completed');
    expect(JSON.parse(frames.at(-1)?.data ?? '{}')).toMatchObject({ output: { n: 5, done: true } });
  });

  it('a resumed stream: what is after Last-Event-ID, then it ends; a client with everything gets 204', async () => {
    const body = await accept();
    const all = await collect(await fetch(`${base}${body.links.events}`));
    const last = Number(all.at(-1)?.id);
    expect(all.at(-1)?.event).toBe('completed');
    const resume = (id: number | string, url = `${base}${body.links.events}`) =>
      fetch(url, { headers: { 'last-event-id': String(id) }, signal: AbortSignal.timeout(5_000) });
    const tail = await collect(await resume(last - 1));
    expect(tail.map((f) => Number(f.id))).toEqual([last]);
    // Everything already received (an EventSource reconnecting after the end), or an id
    // past the end: 204, which tells an EventSource to stop; no stream held open.
    for (const id of [last, last + 100]) {
      const res = await resume(id);
      expect(res.status).toBe(204);
      expect(await res.text()).toBe('');
    }
    // The admin listener's stream of the same execution answers alike.
    const admin = await resume(last, `${adminBase}/api/executions/${body.executionId}/events`);
    expect(admin.status).toBe(204);
  });

  it('a running execution resumed from an id past its events still ends with it', async () => {
    const body = await accept();
    const res = await fetch(`${base}${body.links.events}`, {
      headers: { 'last-event-id': '999' },
      signal: AbortSignal.timeout(5_000),
    });
    expect(res.status).toBe(200);
    // Nothing to send after 999, but the stream ends when the execution does.
    expect(await collect(res)).toEqual([]);
    expect((await finished(body.executionId)).status).toBe('succeeded');
  });

  it('self shows status, output and times, not the input, the log or the digest', async () => {
    const body = await accept('subscribe', 7);
    await finished(body.executionId);
    const res = await fetch(`${base}${body.links.self}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const view = (await res.json()) as Record<string, unknown>;
    expect(view).toMatchObject({
      executionId: body.executionId,
      status: 'succeeded',
      output: { n: 7, done: true },
      createdAt: expect.any(String),
      finishedAt: expect.any(String),
    });
    expect(Object.keys(view)).not.toContain('input');
    expect(Object.keys(view)).not.toContain('log');
    expect(Object.keys(view)).not.toContain('accessDigest');
  });

  it('the events channel is not stored by caches either (its URL holds the token, its frames the output)', async () => {
    const body = await accept('subscribe', 8);
    const res = await fetch(`${base}${body.links.events}`, { signal: AbortSignal.timeout(5_000) });
    expect(res.status).toBe(200);
    const directives = (res.headers.get('cache-control') ?? '').split(',').map((d) => d.trim());
    expect(directives).toContain('no-store');
    expect(res.headers.get('referrer-policy')).toBe('no-referrer');
    expect((await collect(res)).at(-1)?.event).toBe('completed');
  });

  it('the token also comes as Authorization: Bearer', async () => {
    const body = await accept();
    const token = tokenOf(body.links.self);
    const headers = { authorization: `Bearer ${token}` };
    const res = await fetch(`${base}/webhook-executions/${body.executionId}`, { headers });
    expect(res.status).toBe(200);
    const frames = await collect(
      await fetch(`${base}/webhook-executions/${body.executionId}/events`, { headers }),
    );
    expect(frames.at(-1)?.event).toBe('completed');
  });

  it('a missing, wrong or other execution’s token, or an unknown id, is the same 404', async () => {
    const one = await accept();
    const two = await accept();
    const id = one.executionId;
    const wrong = 'A'.repeat(43);
    for (const url of [
      `/webhook-executions/${id}`,
      `/webhook-executions/${id}/events`,
      `/webhook-executions/${id}?token=${wrong}`,
      `/webhook-executions/${id}/events?token=${wrong}`,
      `/webhook-executions/${id}?token=${tokenOf(two.links.self)}`,
      `/webhook-executions/${id}/events?token=${tokenOf(two.links.self)}`,
      `/webhook-executions/not-an-id?token=${tokenOf(one.links.self)}`,
    ]) {
      const res = await fetch(`${base}${url}`);
      expect(res.status, url).toBe(404);
      expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      const { instance, ...problem } = (await res.json()) as Record<string, unknown>;
      // Known id or not, the same answer; the token is never echoed.
      expect(problem).toEqual({
        type: `${PROBLEM_BASE}execution-link-not-found`,
        title: 'Execution link not found',
        status: 404,
        detail: 'No execution at this link',
        code: 'HG_ERR_EXECUTION_LINK_NOT_FOUND',
      });
      expect(String(instance)).not.toContain('token');
    }
    const bearer = await fetch(`${base}/webhook-executions/${id}`, {
      headers: { authorization: `Bearer ${tokenOf(two.links.self)}` },
    });
    expect(bearer.status).toBe(404);
  });

  it('only the digest is kept: the token is in neither the record nor the admin API', async () => {
    const body = await accept();
    const token = tokenOf(body.links.self);
    const record = await finished(body.executionId);
    expect(record.accessDigest).toBe(createHash('sha256').update(token).digest('hex'));
    expect(JSON.stringify(record)).not.toContain(token);
    const one = await (await fetch(`${adminBase}/api/executions/${body.executionId}`)).text();
    const list = await (
      await fetch(`${adminBase}/api/executions?trigger=default/subscribe`)
    ).text();
    for (const text of [one, list]) {
      expect(text).toContain(body.executionId);
      expect(text).not.toContain(token);
      expect(text).not.toContain('accessDigest');
      expect(text).not.toContain(record.accessDigest as string);
    }
  });

  it('the links follow the trigger’s CORS policy', async () => {
    const body = await accept('browser');
    const allowed = await fetch(`${base}${body.links.self}`, {
      headers: { origin: 'https://app.example.com' },
    });
    expect(allowed.status).toBe(200);
    expect(allowed.headers.get('access-control-allow-origin')).toBe('https://app.example.com');
    const refused = await fetch(`${base}${body.links.self}`, {
      headers: { origin: 'https://evil.example' },
    });
    expect(refused.status).toBe(403);
    expect(refused.headers.get('access-control-allow-origin')).toBeNull();
  });
});
