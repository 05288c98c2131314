// Shadow mode of the rate limit (`rateLimit.enforce: false`, acceptance rule E3): a
// limit measured before it is enforced. Over the limit the gateway still answers as
// usual, sends no RateLimit headers, and counts the excess as decision="shadowed"; the
// endpoint's OpenAPI document promises no 429. Turning enforcement on (a spec edit)
// refuses from then on.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { trigger, workflow } from '../support/manifests.ts';

const PATH = '/webhook/default_production_orders/measured';

describe('rate limit in shadow mode', () => {
  let rt: TestRuntime;
  const limited = (enforce: boolean) =>
    trigger('measured', {
      pathSegment: 'measured',
      rateLimit: { requestsPerMinute: 2, enforce },
    });
  beforeAll(async () => {
    rt = await startRuntime();
    await rt.apply('orders.yaml', [workflow('orders'), limited(false)], ['measured']);
  });
  afterAll(() => rt.stop());

  const post = () =>
    rt.app.inject({
      method: 'POST',
      url: PATH,
      headers: { 'content-type': 'application/json' },
      payload: '{}',
    });
  const decisions = async () => {
    const text = (await rt.app.inject({ method: 'GET', url: '/metrics' })).body;
    const count = (decision: string) =>
      Number(
        new RegExp(
          `^hookgate_rate_limit_decisions_total\\{decision="${decision}"\\} (\\d+)$`,
          'm',
        ).exec(text)?.[1] ?? 0,
      );
    return { allowed: count('allowed'), shadowed: count('shadowed'), rejected: count('rejected') };
  };

  it('answers every request, without RateLimit headers, and counts the excess', async () => {
    const answers = [];
    for (let i = 0; i < 5; i++) answers.push(await post());
    expect(answers.map((a) => a.statusCode)).toEqual([202, 202, 202, 202, 202]);
    for (const a of answers) expect(a.headers['ratelimit-limit']).toBeUndefined();
    expect(await decisions()).toEqual({ allowed: 2, shadowed: 3, rejected: 0 });
  });

  it('its OpenAPI document has no 429; enforcing has, and refuses', async () => {
    const responses = async () => {
      const doc = (
        await rt.admin.inject({ method: 'GET', url: '/api/triggers/default/measured/openapi.json' })
      ).json<{ paths: Record<string, { post: { responses: Record<string, unknown> } }> }>();
      return Object.values(doc.paths)[0]?.post.responses ?? {};
    };
    expect((await responses())['429']).toBeUndefined();
    await rt.apply('orders.yaml', [workflow('orders'), limited(true)], ['measured']);
    expect((await responses())['429']).toBeDefined();
    const refused = await post();
    expect(refused.statusCode).toBe(429);
    expect(refused.headers['ratelimit-limit']).toBe('2');
  });
});
