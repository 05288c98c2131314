// Traces without secrets in paths (ADR 0040, amended 2026-11-28 (day)): a webhook path's
// parameter values (a caller's token, Slack-style /hooks/T000/B000/XXXX), the query, the
// caller's headers and an unmatched path never reach a span; an http node's URL path
// (where chat and bot webhooks put their token) neither, in url.full or in a failure's
// status message; status messages are bounded.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../support/eventually.ts';
import { one, traceOf } from '../support/tracing.ts';
import { trigger, workflow } from '../support/manifests.ts';
import { SPAN_KIND, type OtlpReceiver } from '../support/otlp-receiver.ts';
import {
  startTracedRuntime,
  type Downstream,
  type TracedRuntime,
} from '../support/traced-runtime.ts';

const wf = '/webhook/default_production_';
/** In every value a caller or a workflow puts where a secret may be: never in a span. */
const SECRET = 's3cr3t';

describe('traces without secrets in paths', () => {
  let otlp: OtlpReceiver;
  let downstream: Downstream;
  let base = '';
  let traced: TracedRuntime | undefined;

  beforeAll(async () => {
    traced = await startTracedRuntime({
      answer: (r) => (r.url.includes('boom') ? 503 : 200),
      file: 'redaction.yaml',
      manifests: (downstreamUrl) => [
        workflow('echo'),
        workflow('chat', {
          nodes: [
            {
              id: 'post',
              type: 'http',
              // A chat service's incoming webhook: the token is the path.
              request: { method: 'POST', url: `${downstreamUrl}/services/T000/B000/${SECRET}-ok` },
            },
          ],
        }),
        workflow('chatdown', {
          nodes: [
            {
              id: 'post',
              type: 'http',
              request: { method: 'POST', url: `${downstreamUrl}/bot${SECRET}-boom/sendMessage` },
            },
          ],
        }),
        workflow('says', {
          nodes: [
            // A fail node's message is the workflow's, from the caller's input.
            { id: 'stop', type: 'fail', expression: 'body.why', statusCode: 422 },
          ],
        }),
        trigger('hooks', {
          workflowRef: { name: 'echo' },
          pathSegment: 'hooks/:team/:bot/:token',
          response: { mode: 'waitForCompletion' },
        }),
        trigger('chat', {
          workflowRef: { name: 'chat' },
          pathSegment: 'chat',
          response: { mode: 'waitForCompletion' },
        }),
        trigger('chatdown', {
          workflowRef: { name: 'chatdown' },
          pathSegment: 'chatdown',
          response: { mode: 'waitForCompletion' },
        }),
        trigger('says', {
          workflowRef: { name: 'says' },
          pathSegment: 'says',
          response: { mode: 'waitForCompletion' },
        }),
      ],
      ready: ['hooks', 'chat', 'chatdown', 'says'],
    });
    ({ otlp, downstream, base } = traced);
  }, 30_000);
  afterAll(() => traced?.stop());

  const send = (path: string, init: RequestInit = {}) =>
    fetch(`${base}${path}`, {
      method: 'POST',
      ...init,
      headers: {
        'content-type': 'application/json',
        'user-agent': `agent-${SECRET}`,
        ...(init.headers as Record<string, string> | undefined),
      },
      body: init.body ?? '{"n":1}',
    });
  const serverSpanOf = (name: string, status: number) =>
    traceOf(
      otlp,
      (s) =>
        s.kind === SPAN_KIND.server &&
        s.attributes['hookgate.trigger.name'] === name &&
        s.attributes['http.response.status_code'] === status,
      1,
    ).then((spans) => one(spans, (s) => s.kind === SPAN_KIND.server));

  it("a request's url.path has its parameters' values REDACTED; no attribute carries the path or the query", async () => {
    const res = await send(`${wf}echo/hooks/T000/B000/${SECRET}-token?sig=${SECRET}-query`);
    expect(res.status).toBe(200);
    const server = await serverSpanOf('hooks', 200);
    expect(server.name).toBe(`POST ${wf}echo/hooks/:team/:bot/:token`);
    expect(server.attributes).toMatchObject({
      'http.route': `${wf}echo/hooks/:team/:bot/:token`,
      'url.path': `${wf}echo/hooks/REDACTED/REDACTED/REDACTED`,
    });
    expect(JSON.stringify(server)).not.toContain(SECRET);
    expect(JSON.stringify(server)).not.toContain('T000');
  });

  it('a refused request (405) on such a path: the same redacted path', async () => {
    const res = await send(`${wf}echo/hooks/T000/B000/${SECRET}-refused`, { method: 'PUT' });
    expect(res.status).toBe(405);
    const server = await serverSpanOf('hooks', 405);
    expect(server.attributes['url.path']).toBe(`${wf}echo/hooks/REDACTED/REDACTED/REDACTED`);
    expect(JSON.stringify(server)).not.toContain(SECRET);
  });

  it('an unmatched path (404, 414): no span records it, whatever its length', async () => {
    expect((await send(`${wf}echo/nowhere/${SECRET}-unmatched?k=${SECRET}`)).status).toBe(404);
    expect((await send(`${wf}echo/hooks/a/b/${SECRET}${'x'.repeat(600)}`)).status).toBe(414);
    // A request after them, whose span is exported after theirs would have been.
    const before = otlp.spans.length;
    expect((await send(`${wf}echo/hooks/a/b/c`)).status).toBe(200);
    await eventually(() => {
      const later = otlp.spans.slice(before);
      expect(later.some((s) => s.attributes['hookgate.trigger.name'] === 'hooks')).toBe(true);
    });
    const all = JSON.stringify(otlp.spans);
    expect(all).not.toContain('unmatched');
    expect(all).not.toContain('nowhere');
    expect(all).not.toContain('x'.repeat(100));
  });

  it("an http node's CLIENT span: url.full is the origin and /REDACTED, server.address and port stay", async () => {
    const res = await send(`${wf}chat/chat`);
    expect(res.status).toBe(200);
    const spans = await traceOf(
      otlp,
      (s) => s.kind === SPAN_KIND.server && s.attributes['hookgate.trigger.name'] === 'chat',
      4,
    );
    const client = one(spans, (s) => s.kind === SPAN_KIND.client);
    expect(client.attributes).toMatchObject({
      'url.full': `${downstream.url}/REDACTED`,
      'server.address': '127.0.0.1',
      'server.port': downstream.port,
      'http.response.status_code': 200,
      'hookgate.outbound.purpose': 'http-node',
    });
    expect(JSON.stringify(spans)).not.toContain(SECRET);
    expect(JSON.stringify(spans)).not.toContain('T000');
    // The call itself went to the whole URL.
    expect(downstream.received.some((r) => r.url === `/services/T000/B000/${SECRET}-ok`)).toBe(
      true,
    );
  });

  it("a failed http node: the node's and the execution's status messages name the call's origin, not its path", async () => {
    const res = await send(`${wf}chatdown/chatdown`);
    expect(res.status).toBe(500);
    const spans = await traceOf(
      otlp,
      (s) => s.kind === SPAN_KIND.server && s.attributes['hookgate.trigger.name'] === 'chatdown',
      4,
    );
    const node = one(spans, (s) => s.name === 'http post');
    expect(node.status.message).toBe(
      `node 'post' failed: POST ${downstream.url}/REDACTED answered 503`,
    );
    const execution = one(spans, (s) => s.name === 'execute default_production_chatdown');
    expect(execution.status.message).toBe(node.status.message);
    expect(JSON.stringify(spans)).not.toContain(SECRET);
  });

  it("a fail node's message from the caller's input: URLs in it as origins, at most 256 characters", async () => {
    const why = `see https://user:pw@hooks.example/T000/${SECRET}?k=${SECRET} and 'http://a b/${SECRET}' ${'y'.repeat(3000)}`;
    const res = await send(`${wf}says/says`, { body: JSON.stringify({ why }) });
    expect(res.status).toBe(422);
    const spans = await traceOf(
      otlp,
      (s) => s.kind === SPAN_KIND.server && s.attributes['hookgate.trigger.name'] === 'says',
      3,
    );
    const node = one(spans, (s) => s.name === 'fail stop');
    expect(node.status.message).toMatch(
      /^see https:\/\/hooks\.example\/REDACTED and 'http:\/\/a\/REDACTED' y+…$/,
    );
    expect(node.status.message?.length).toBe(256);
    const execution = one(spans, (s) => s.name === 'execute default_production_says');
    expect(execution.status.message?.length).toBeLessThanOrEqual(256);
    expect(JSON.stringify(spans)).not.toContain(SECRET);
  });
});
