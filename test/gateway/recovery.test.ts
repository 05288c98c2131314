// Retries seen from the outside, embedded mode: response modes with a retry policy, the
// dead-letter list on the admin listener (one by one, in bulk, idempotent, in the
// metrics) and replay of stored requests with the trigger's current configuration.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import type { Execution } from '../../runtime/engine/ports.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { eventually } from '../support/eventually.ts';
import { trigger, workflow } from '../support/manifests.ts';

const BASE = '/webhook/default_production';
/** The workflow of each trigger (its path is /webhook/<workflowId>/<segment>). */
const WORKFLOW_OF: Record<string, string> = {
  wait: 'flaky',
  stream: 'flaky',
  doomed: 'doomed',
  echo: 'echo',
};

/** Fails (503, a fail node) while the clock is before body.failUntil (ms), then answers. */
const flakyNodes = [
  { id: 'check', type: 'if', condition: '$millis() < $trigger.body.failUntil', else: 'ok' },
  { id: 'stop', type: 'fail', expression: '"not yet"', statusCode: 503 },
  { id: 'ok', type: 'transform', expression: '{ "done": $trigger.body.n }' },
];
const retry = (attempts: number, initial = '20ms') => ({
  attempts,
  backoff: { initial, max: '1s', multiplier: 2, jitter: 0.5 },
  on: ['fail'],
});

function problem(res: LightMyRequestResponse, status: number, type: string) {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
  const doc = res.json<{ type: string; errors?: unknown[] }>();
  expect(doc.type).toBe(`https://hookgate.dev/problems/${type}`);
  return doc;
}

describe('retries, dead letters and replay (embedded)', () => {
  let rt: TestRuntime;
  const post = async (path: string, body: unknown, headers: Record<string, string> = {}) =>
    rt.app.inject({
      method: 'POST',
      url: `${BASE}_${WORKFLOW_OF[path]}/${path}`,
      headers: { 'content-type': 'application/json', ...headers },
      payload: JSON.stringify(body),
    });
  const admin = (method: 'GET' | 'POST', url: string, payload?: unknown) =>
    rt.admin.inject({
      method,
      url,
      ...(payload !== undefined
        ? { payload: JSON.stringify(payload), headers: { 'content-type': 'application/json' } }
        : {}),
    });
  const record = async (id: string) =>
    (await admin('GET', `/api/executions/${id}`)).json<Execution>();
  const finished = (id: string) =>
    eventually(async () => {
      const e = await record(id);
      expect(['succeeded', 'failed']).toContain(e.status);
      return e;
    }, 15_000);
  const metric = async (pattern: RegExp) => {
    const text = (await rt.app.inject({ method: 'GET', url: '/metrics' })).body;
    return Number(pattern.exec(text)?.[1] ?? 'NaN');
  };

  const manifests = (echo = '{ "echo": $trigger.body, "version": 1 }') => [
    workflow('flaky', { nodes: flakyNodes, retry: retry(6) }),
    workflow('doomed', {
      nodes: [{ id: 'stop', type: 'fail', expression: '"down"', statusCode: 502 }],
      retry: retry(2),
    }),
    workflow('echo', { nodes: [{ id: 'echo', type: 'transform', expression: echo }] }),
    trigger('wait', {
      workflowRef: { name: 'flaky' },
      pathSegment: 'wait',
      response: { mode: 'waitForCompletion' },
      timeout: '20s',
    }),
    trigger('stream', {
      workflowRef: { name: 'flaky' },
      pathSegment: 'stream',
      response: { mode: 'sseStream' },
      timeout: '20s',
    }),
    trigger('doomed', { workflowRef: { name: 'doomed' }, pathSegment: 'doomed' }),
    trigger('echo', { workflowRef: { name: 'echo' }, pathSegment: 'echo' }),
  ];

  beforeAll(async () => {
    rt = await startRuntime({ budgets: { storedBodyBytes: 1024 } });
    await rt.apply('all.yaml', manifests(), ['wait', 'stream', 'doomed', 'echo']);
  });
  afterAll(() => rt?.stop());

  it('Wait for Completion answers with the final result once a later attempt succeeds', async () => {
    const res = await post('wait', { n: 3, failUntil: Date.now() + 150 });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ done: 3 });
  });

  it('SSE Stream shows each failed attempt and the next one starting, then the result', async () => {
    const res = await post('stream', { n: 4, failUntil: Date.now() + 60 });
    expect(res.statusCode).toBe(200);
    const types = [...res.body.matchAll(/^event: (.+)$/gm)].map((m) => m[1]);
    expect(types).toContain('attempt.failed');
    expect(types).toContain('attempt.started');
    expect(types.at(-1)).toBe('completed');
    expect(types.filter((t) => t === 'attempt.failed').length).toBe(
      types.filter((t) => t === 'attempt.started').length,
    );
  });

  it('an exhausted execution is listed as a dead letter and counted in the metrics', async () => {
    const before = await metric(/^hookgate_dead_lettered_total (\S+)$/m);
    const res = await post('doomed', { orderId: 1 });
    expect(res.statusCode).toBe(202);
    const { executionId } = res.json<{ executionId: string }>();
    const done = await finished(executionId);
    expect(done).toMatchObject({ status: 'failed', attempt: 2, error: { kind: 'fail' } });
    await eventually(async () => {
      const list = (await admin('GET', '/api/dead-letters?trigger=default/doomed')).json<{
        items: { executionId: string }[];
      }>();
      expect(list.items.map((i) => i.executionId)).toContain(executionId);
    });
    expect((await admin('GET', `/api/dead-letters/${executionId}`)).json()).toMatchObject({
      executionId,
      triggerKey: 'default/doomed',
      namespace: 'default',
      attempts: 2,
      error: { kind: 'fail', statusCode: 502 },
    });
    expect(await metric(/^hookgate_dead_letters (\S+)$/m)).toBeGreaterThanOrEqual(1);
    expect(await metric(/^hookgate_dead_lettered_total (\S+)$/m)).toBe(before + 1);
    expect(
      await metric(/^hookgate_execution_retries_total\{source="automatic"\} (\S+)$/m),
    ).toBeGreaterThanOrEqual(1);
  });

  it('a dead letter retried runs again as a new execution linked to it; retrying it twice is refused', async () => {
    const res = await post('doomed', { orderId: 2 });
    const { executionId } = res.json<{ executionId: string }>();
    await eventually(async () =>
      expect((await admin('GET', `/api/dead-letters/${executionId}`)).statusCode).toBe(200),
    );
    const retried = await admin('POST', `/api/dead-letters/${executionId}/retry`);
    expect(retried.statusCode, retried.body).toBe(202);
    const body = retried.json<{ executionId: string; replayOf: string; links: { self: string } }>();
    expect(body.replayOf).toBe(executionId);
    // One form of id for every execution: a UUID, whoever started it.
    const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
    expect(executionId).toMatch(UUID);
    expect(body.executionId).toMatch(UUID);
    expect(retried.headers.location).toBe(`/api/executions/${body.executionId}`);
    const again = await finished(body.executionId);
    expect(again).toMatchObject({ replayOf: executionId, input: { body: { orderId: 2 } } });
    problem(
      await admin('POST', `/api/dead-letters/${executionId}/retry`),
      404,
      'dead-letter-not-found',
    );
    expect(
      await metric(/^hookgate_execution_retries_total\{source="dead_letter"\} (\S+)$/m),
    ).toBeGreaterThanOrEqual(1);
  });

  it('bulk retry by trigger answers with counts and is idempotent', async () => {
    // Whatever earlier tests left, then three more.
    await admin('POST', '/api/dead-letters/retry', { trigger: 'default/doomed' });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      ids.push(
        (await post('doomed', { orderId: 10 + i })).json<{ executionId: string }>().executionId,
      );
    }
    await eventually(async () => {
      const list = (await admin('GET', '/api/dead-letters?namespace=default')).json<{
        items: { executionId: string }[];
      }>();
      for (const id of ids) expect(list.items.map((i) => i.executionId)).toContain(id);
    }, 15_000);
    type Counts = {
      matched: number;
      retried: number;
      executions: { replayOf: string; executionId: string }[];
    };
    // Two bulk calls at once: each entry is retried by exactly one of them.
    const both = await Promise.all(
      [0, 1].map(() => admin('POST', '/api/dead-letters/retry', { trigger: 'default/doomed' })),
    );
    const counts = both.map((r) => {
      expect(r.statusCode, r.body).toBe(200);
      return r.json<Counts>();
    });
    const originals = counts.flatMap((c) => c.executions.map((e) => e.replayOf));
    expect(new Set(originals).size).toBe(originals.length);
    expect(originals).toEqual(expect.arrayContaining(ids));
    expect(counts.reduce((n, c) => n + c.retried, 0)).toBe(originals.length);
    // Called again: the entries retried are gone (the new executions, failing again,
    // are dead letters of their own, with their own ids).
    const again = (
      await admin('POST', '/api/dead-letters/retry', { trigger: 'default/doomed' })
    ).json<Counts>();
    for (const e of again.executions) expect(originals).not.toContain(e.replayOf);
    problem(
      await admin('POST', '/api/dead-letters/retry', { trigger: 'no-slash' }),
      400,
      'invalid-parameter',
    );
    problem(
      await admin('POST', '/api/dead-letters/retry', { status: 'failed' }),
      400,
      'invalid-parameter',
    );
  });

  it('replay sends a stored request through the trigger as it is now, linked to the original', async () => {
    const res = await post('echo', { orderId: 'o-9' }, { 'x-correlation-id': 'corr-9' });
    const { executionId } = res.json<{ executionId: string }>();
    expect((await finished(executionId)).output).toMatchObject({ version: 1 });
    // The workflow changes: the replay runs the current one.
    await rt.apply('all.yaml', manifests('{ "echo": $trigger.body, "version": 2 }'), ['echo']);
    const replayed = await admin('POST', `/api/executions/${executionId}/replay`);
    expect(replayed.statusCode, replayed.body).toBe(202);
    const body = replayed.json<{ executionId: string; replayOf: string }>();
    expect(body.executionId).not.toBe(executionId);
    const run = await finished(body.executionId);
    expect(run).toMatchObject({
      status: 'succeeded',
      replayOf: executionId,
      output: { echo: { orderId: 'o-9' }, version: 2 },
      input: { body: { orderId: 'o-9' }, metadata: { correlationId: 'corr-9' } },
    });
    problem(await admin('POST', '/api/executions/exec_nope/replay'), 404, 'execution-not-found');
  });

  it('replay is refused with 422 and the violations when the input schema now rejects the body', async () => {
    const res = await post('echo', { orderId: 5 });
    const { executionId } = res.json<{ executionId: string }>();
    await finished(executionId);
    const strict = manifests().map((m) =>
      m.kind === 'WebhookTrigger' && m.metadata.name === 'echo'
        ? {
            ...m,
            spec: {
              ...m.spec,
              schema: {
                mode: 'manual',
                input: { fields: [{ name: 'orderId', type: 'string', required: true }] },
              },
            },
          }
        : m,
    );
    await rt.apply('all.yaml', strict, ['echo']);
    const doc = problem(
      await admin('POST', `/api/executions/${executionId}/replay`),
      422,
      'replay-schema-rejected',
    );
    expect(doc.errors).toEqual([expect.objectContaining({ pointer: '/orderId' })]);
    await rt.apply('all.yaml', manifests(), ['echo']);
  });

  it('replay is refused when the stored body was truncated by the store', async () => {
    const res = await post('echo', { blob: 'x'.repeat(4096) });
    const { executionId } = res.json<{ executionId: string }>();
    const done = await finished(executionId);
    expect(done.truncated?.['input.body']).toBeGreaterThan(4096);
    problem(
      await admin('POST', `/api/executions/${executionId}/replay`),
      409,
      'replay-body-truncated',
    );
  });

  it('replay is refused with 409 when the trigger is gone', async () => {
    const res = await post('echo', { orderId: 'o-gone' });
    const { executionId } = res.json<{ executionId: string }>();
    await finished(executionId);
    await rt.apply(
      'all.yaml',
      manifests().filter((m) => m.metadata.name !== 'echo' || m.kind !== 'WebhookTrigger'),
      [],
    );
    await eventually(async () => expect((await post('echo', {})).statusCode).toBe(404));
    problem(
      await admin('POST', `/api/executions/${executionId}/replay`),
      409,
      'replay-trigger-gone',
    );
  });
});
