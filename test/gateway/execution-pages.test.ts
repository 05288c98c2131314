// GET /api/executions pages: a count limit, a byte budget per page and a cursor; large
// bodies are stored cut and flagged, while the workflow got them whole.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Execution } from '../../runtime/engine/ports.ts';
import { eventually } from '../support/eventually.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { trigger, workflow } from '../support/manifests.ts';

let rt: TestRuntime;
const PAGE_BYTES = 64 * 1024;
const BODY_BYTES = 4 * 1024;

beforeAll(async () => {
  rt = await startRuntime({
    budgets: { listPageBytes: PAGE_BYTES, storedBodyBytes: BODY_BYTES },
  });
  await rt.apply(
    'pages.yaml',
    [
      // The output is the body's length: computed from the whole body.
      workflow('orders', {
        nodes: [{ id: 'size', type: 'transform', expression: '{ "length": $length(body.text) }' }],
      }),
      trigger('ingest', { pathSegment: 'ingest', methods: ['POST'] }),
      workflow('echo', { nodes: [{ id: 'echo', type: 'transform', expression: 'body' }] }),
      trigger('echo', {
        workflowRef: { name: 'echo' },
        pathSegment: 'echo',
        methods: ['POST'],
        response: { mode: 'waitForCompletion' },
      }),
    ],
    ['ingest', 'echo'],
  );
  for (let i = 0; i < 30; i++) {
    const res = await rt.app.inject({
      method: 'POST',
      url: '/webhook/default_production_orders/ingest',
      payload: { i, text: 'a'.repeat(20_000) },
    });
    expect(res.statusCode).toBe(202);
  }
  await eventually(async () => {
    const all = await rt.engine.list({ status: 'succeeded', limit: 1000 });
    expect(all).toHaveLength(30);
  });
});
afterAll(() => rt.stop());

type Page = { items: Execution[]; next?: string; links?: { next: string } };

async function get(url: string): Promise<{ status: number; body: Page; bytes: number }> {
  const res = await rt.admin.inject({ method: 'GET', url });
  return { status: res.statusCode, body: res.json<Page>(), bytes: res.rawPayload.length };
}

describe('executions listing', () => {
  it('keeps large bodies cut, with the whole size, after the workflow saw them whole', async () => {
    const { body } = await get('/api/executions?limit=1');
    const [e] = body.items;
    expect(e?.output).toEqual({ length: 20_000 });
    expect(typeof e?.input.body).toBe('string');
    expect((e?.input.body as string).length).toBe(BODY_BYTES);
    expect(e?.truncated).toEqual({
      'input.body': Buffer.byteLength(JSON.stringify({ i: 29, text: 'a'.repeat(20_000) })),
    });
  });

  it('pages by count with a cursor, every execution once, newest first', async () => {
    const ids: string[] = [];
    let url: string | undefined = '/api/executions?limit=7&status=succeeded';
    let pages = 0;
    while (url) {
      const { status, body }: { status: number; body: Page } = await get(url);
      expect(status).toBe(200);
      expect(body.items.length).toBeLessThanOrEqual(7);
      ids.push(...body.items.map((e) => e.id));
      url = body.links?.next;
      if (url) expect(url).toContain('status=succeeded');
      pages++;
    }
    expect(pages).toBe(5);
    expect(new Set(ids).size).toBe(30);
    const all = await rt.engine.list({ limit: 1000 });
    expect(all.map((e) => e.id)).toEqual(ids);
  });

  it('stops a page at its byte budget, whatever the limit', async () => {
    const { status, body, bytes } = await get('/api/executions?limit=1000');
    expect(status).toBe(200);
    expect(body.items.length).toBeGreaterThan(1);
    expect(body.items.length).toBeLessThan(30);
    expect(bytes).toBeLessThan(PAGE_BYTES * 1.5);
    expect(body.next).toBeTypeOf('string');
  });

  it('a waiting caller gets the whole output; a retry of a large answer gets a handle', async () => {
    const payload = { text: 'b'.repeat(10_000) };
    const post = () =>
      rt.app.inject({
        method: 'POST',
        url: '/webhook/default_production_echo/echo',
        headers: { 'idempotency-key': 'large-answer' },
        payload,
      });
    const first = await post();
    expect(first.statusCode).toBe(200);
    expect(first.json()).toEqual(payload);
    const again = await post();
    expect(again.headers['idempotent-replayed']).toBe('true');
    const handle = again.json<{ executionId: string; links: { self: string } }>();
    expect(handle.links.self).toMatch(/^\/webhook-executions\/[^/?]+\?token=/);
    const view = await rt.app.inject({ method: 'GET', url: handle.links.self });
    expect(view.json()).toMatchObject({
      executionId: handle.executionId,
      truncated: { output: first.rawPayload.length },
    });
  });

  it.each([
    ['limit', '1e2'],
    ['limit', '0x10'],
    ['limit', ' 5'],
    ['limit', '0'],
    ['limit', '1001'],
    ['since', '1'],
    ['since', 'May 5'],
    ['until', '2026-11-27'],
    ['since', '2026-02-30T00:00:00Z'],
    ['until', '2026-11-27T24:00:00Z'],
  ])('refuses %s=%j: 400 saying what is expected', async (name, value) => {
    const res = await rt.admin.inject({
      method: 'GET',
      url: `/api/executions?${name}=${encodeURIComponent(value)}`,
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ errors: [{ pointer: `#/query/${name}` }] });
  });

  it('takes RFC 3339 times with an offset or fractions, and a plain limit', async () => {
    for (const query of [
      'since=2026-11-27T12:00:00%2B01:00',
      'until=2999-01-01T00:00:00.123456Z',
      'limit=5',
    ]) {
      const res = await rt.admin.inject({ method: 'GET', url: `/api/executions?${query}` });
      expect(res.statusCode, query).toBe(200);
    }
  });

  it('refuses a cursor it did not make', async () => {
    const res = await rt.admin.inject({ method: 'GET', url: '/api/executions?cursor=%25%25' });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ errors: [{ pointer: '#/query/cursor' }] });
  });
});
