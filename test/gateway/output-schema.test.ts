// The trigger's output schema is enforced on the workflow's final output: a workflow
// whose output breaks it fails with output-schema-violation (500), one that keeps it
// answers as usual.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROBLEM_BASE } from '../../runtime/errors.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { trigger, workflow } from '../support/manifests.ts';

let rt: TestRuntime;

beforeAll(async () => {
  rt = await startRuntime();
  const schema = {
    mode: 'manual',
    output: { fields: [{ name: 'total', type: 'number', required: true }] },
  };
  await rt.apply(
    'output.yaml',
    [
      workflow('orders', {
        nodes: [{ id: 'sum', type: 'transform', expression: '{ "total": body.total }' }],
      }),
      trigger('wait', { pathSegment: 'wait', response: { mode: 'waitForCompletion' }, schema }),
    ],
    ['wait'],
  );
});
afterAll(async () => {
  await rt?.stop();
});

describe('output schema', () => {
  const send = (body: unknown) =>
    rt.app.inject({
      method: 'POST',
      url: '/webhook/default_production_orders/wait',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify(body),
    });

  it('an output that keeps the schema is answered', async () => {
    const res = await send({ total: 12 });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ total: 12 });
  });

  it('an output that breaks it fails the execution with output-schema-violation', async () => {
    const res = await send({ total: 'twelve' });
    expect(res.statusCode).toBe(500);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.json()).toMatchObject({ type: `${PROBLEM_BASE}output-schema-violation` });
    const [latest] = await rt.engine.list({ triggerKey: 'default/wait', limit: 1 });
    expect(latest?.error).toMatchObject({ code: 'HG_ERR_OUTPUT_SCHEMA' });
    expect(latest?.error?.message).toMatch(/\/total/);
  });
});
