// Automatic IO that learns, embedded end to end: a trigger with learning on and no
// schema accepts JSON without validating, its request bodies and workflow responses are
// sampled (bounded, bodies only), the admin API proposes schemas and the manifest block
// to paste, and applying that block (the user's GitOps step) turns validation on.
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admitResource } from '../../api/validate.ts';
import { compileSchemas } from '../../api/schemas.ts';
import { PROBLEM_BASE } from '../../runtime/errors.ts';
import { eventually } from '../support/eventually.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { trigger, workflow } from '../support/manifests.ts';

let rt: TestRuntime;
const base = '/webhook/default_production_orders';
const learningSchema = {
  mode: 'automatic',
  input: { source: 'orders-api' },
  output: {},
  learning: { enabled: true, maxSamples: 5 },
};
const orders = workflow('orders', {
  nodes: [
    {
      id: 'answer',
      type: 'transform',
      expression: '{ "received": body.id, "lines": $count(body.items) }',
    },
  ],
});
const learner = (schema: Record<string, unknown>) =>
  trigger('learn', { pathSegment: 'learn', response: { mode: 'waitForCompletion' }, schema });
const fixed = trigger('fixed', {
  pathSegment: 'fixed',
  schema: { mode: 'automatic', input: { example: '{"a":1}' }, output: { example: '{}' } },
});
/** The manifest file with the learning trigger's schema as given. */
const applyLearner = (schema: Record<string, unknown>) =>
  rt.apply('learn.yaml', [orders, learner(schema), fixed], ['learn', 'fixed']);

beforeAll(async () => {
  rt = await startRuntime();
  await applyLearner(learningSchema);
});
afterAll(() => rt.stop());

interface Proposal {
  learning: boolean;
  samples: { requests: number; responses: number };
  input: Record<string, unknown> | null;
  output: Record<string, unknown> | null;
  manifest: string;
}

const post = (body: unknown, headers: Record<string, string> = {}) =>
  rt.app.inject({
    method: 'POST',
    url: `${base}/learn`,
    headers: { 'content-type': 'application/json', ...headers },
    payload: JSON.stringify(body),
  });

async function proposal(): Promise<Proposal> {
  const res = await rt.admin.inject({ url: '/api/triggers/default/learn/schema-proposal' });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

const traffic = [
  { id: 1, customer: { email: 'a@x' }, items: [{ sku: 'a', qty: 1 }], note: null },
  { id: 2, customer: { email: 'b@x', vip: true }, items: [{ sku: 'b', qty: 2.5, gift: true }] },
  { id: 3, customer: { email: 'c@x' }, items: [], note: 'leave at door' },
];

describe('schema learning (embedded)', () => {
  it('accepts any JSON without validating, and samples bodies and responses', async () => {
    const reset = await rt.admin.inject({
      method: 'DELETE',
      url: '/api/triggers/default/learn/schema-proposal/samples',
    });
    expect(reset.statusCode).toBe(204);
    for (const body of traffic) {
      const res = await post(body, { authorization: 'Bearer secret-token', 'x-api-key': 'k' });
      expect(res.statusCode, res.body).toBe(200);
    }
    // A form is served (not validated either) but is not a JSON sample.
    const form = await rt.app.inject({
      method: 'POST',
      url: `${base}/learn`,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: 'id=9',
    });
    expect(form.statusCode).toBe(200);
    const p = await eventually(async () => {
      const found = await proposal();
      // The form's response is a JSON sample: it ran the workflow like any other.
      if (found.samples.responses < 4) throw new Error(JSON.stringify(found.samples));
      return found;
    });
    expect(p.learning).toBe(true);
    expect(p.samples).toEqual({ requests: 3, responses: 4 });
    expect(p.input).toEqual({
      type: 'object',
      properties: {
        id: { type: 'integer' },
        customer: {
          type: 'object',
          properties: { email: { type: 'string' }, vip: { type: 'boolean' } },
          required: ['email'],
        },
        items: {
          type: 'array',
          items: {
            type: 'object',
            properties: {
              sku: { type: 'string' },
              qty: { type: 'number' },
              gift: { type: 'boolean' },
            },
            required: ['sku', 'qty'],
          },
        },
        note: { type: ['string', 'null'] },
      },
      required: ['id', 'customer', 'items'],
    });
    // The form's id is the string "9": the output place has seen both types.
    expect(p.output).toEqual({
      type: 'object',
      properties: { received: { type: ['string', 'integer'] }, lines: { type: 'integer' } },
      required: ['received', 'lines'],
    });
    // Bodies only: neither headers nor credentials are in what was learned.
    expect(JSON.stringify(p)).not.toMatch(/secret-token|authorization|x-api-key/i);
    // What the samples take is in the store metrics, as every store's (docs/limits.md).
    const metrics = (await rt.app.inject({ url: '/metrics' })).body;
    expect(metrics).toMatch(/^hookgate_store_entries\{store="schema-samples"\} 7$/m);
    expect(
      Number(/^hookgate_store_bytes\{store="schema-samples"\} (\d+)$/m.exec(metrics)?.[1]),
    ).toBeGreaterThan(100);
  });

  it('keeps at most maxSamples per side (the newest)', async () => {
    for (let i = 0; i < 8; i++) expect((await post({ seq: i })).statusCode).toBe(200);
    const p = await eventually(async () => {
      const found = await proposal();
      if (found.samples.responses < 5) throw new Error(JSON.stringify(found.samples));
      return found;
    });
    expect(p.samples).toEqual({ requests: 5, responses: 5 });
    // Only the newest five ({seq}) remain: the first traffic's keys are gone.
    expect(p.input).toEqual({
      type: 'object',
      properties: { seq: { type: 'integer' } },
      required: ['seq'],
    });
  });

  it('proposes a manifest block that is admitted, compiles and validates the samples', async () => {
    await rt.admin.inject({
      method: 'DELETE',
      url: '/api/triggers/default/learn/schema-proposal/samples',
    });
    for (const body of traffic) expect((await post(body)).statusCode).toBe(200);
    const p = await eventually(async () => {
      const found = await proposal();
      if (found.samples.responses < 3) throw new Error(JSON.stringify(found.samples));
      return found;
    });
    const block = parse(p.manifest) as { schema: Record<string, unknown> };
    expect(block.schema).toMatchObject({
      mode: 'automatic',
      input: { source: 'orders-api' },
      learning: { enabled: false },
    });
    const admitted = admitResource(learner(block.schema));
    expect(admitted.ok, JSON.stringify(admitted)).toBe(true);
    const compiled = compileSchemas(block.schema as never);
    if ('error' in compiled) throw new Error(compiled.error);
    for (const body of traffic) expect(compiled.input?.(body)).toEqual([]);
    expect(JSON.parse((block.schema.input as { jsonSchema: string }).jsonSchema)).toEqual(p.input);

    // Accepting = applying the block. The trigger validates now, and stops learning.
    await applyLearner(block.schema);
    await eventually(async () => {
      const res = await post({ id: 'not-an-integer' });
      if (res.statusCode !== 422) throw new Error(`${res.statusCode} ${res.body}`);
    });
    expect((await post(traffic[0])).statusCode).toBe(200);
    const refused = await rt.admin.inject({ url: '/api/triggers/default/learn/schema-proposal' });
    expect(refused.statusCode).toBe(409);
    expect(refused.json()).toMatchObject({ type: `${PROBLEM_BASE}schema-not-learning` });

    // Switched off, nothing was recorded: switching it on again shows the same counts.
    await applyLearner(learningSchema);
    await eventually(async () => {
      const res = await rt.admin.inject({ url: '/api/triggers/default/learn/schema-proposal' });
      if (res.statusCode !== 200) throw new Error(res.body);
    });
    expect((await proposal()).samples).toEqual({ requests: 3, responses: 3 });
  });

  it('answers 404 for an unknown trigger and 409 for one that does not learn', async () => {
    const unknown = await rt.admin.inject({ url: '/api/triggers/default/nope/schema-proposal' });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json()).toMatchObject({ type: `${PROBLEM_BASE}resource-not-found` });
    const fixed = await rt.admin.inject({ url: '/api/triggers/default/fixed/schema-proposal' });
    expect(fixed.statusCode).toBe(409);
    expect(fixed.headers['content-type']).toMatch(/^application\/problem\+json/);
    const reset = await rt.admin.inject({
      method: 'DELETE',
      url: '/api/triggers/default/nope/schema-proposal/samples',
    });
    expect(reset.statusCode).toBe(404);
  });

  it('resets the samples', async () => {
    const reset = await rt.admin.inject({
      method: 'DELETE',
      url: '/api/triggers/default/learn/schema-proposal/samples',
    });
    expect(reset.statusCode).toBe(204);
    const p = await proposal();
    expect(p.samples).toEqual({ requests: 0, responses: 0 });
    expect(p.input).toBeNull();
    expect(p.output).toBeNull();
  });
});
