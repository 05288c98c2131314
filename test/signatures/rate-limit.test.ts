// A signed endpoint's rate limit counts only deliveries whose signature verified
// (ADR 0014, amended 2026-11-28): unsigned, badly signed and replayed requests get their
// 401 and consume nothing, so an anonymous caller cannot spend the real sender's limit
// (GitHub does not retry a 429: the delivery was lost). A delivery refused with 429
// gives its replay claim back, so the sender's retry is accepted. In memory (`dev`) and
// on Redis (the limiter's and the replay store's Redis adapters).
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROBLEM_BASE } from '../../runtime/errors.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { secret, trigger, workflow } from '../support/manifests.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';
import { githubSignature, slackSignature } from './support.ts';

const SECRET = 'gh-rate-limit-secret-0123';
const SLACK_SECRET = 'slack-rate-limit-secret-4567';
const LIMIT = 3;
const base = '/webhook/default_production_echo';

type Res = { statusCode: number; headers: Record<string, unknown>; body: string; json(): unknown };
const typeOf = (res: Res) => (res.json() as { type?: string }).type;

function docs() {
  return [
    secret('gh', { current: SECRET }),
    secret('slack', { current: SLACK_SECRET }),
    workflow('echo', { nodes: [{ id: 'out', type: 'transform', expression: 'body' }] }),
    trigger('github', {
      workflowRef: { name: 'echo' },
      pathSegment: 'github',
      auth: { method: 'signature', signature: { preset: 'github', secretRef: { name: 'gh' } } },
      rateLimit: { requestsPerMinute: LIMIT },
    }),
    trigger('bodies', {
      workflowRef: { name: 'echo' },
      pathSegment: 'bodies',
      auth: { method: 'signature', signature: { preset: 'github', secretRef: { name: 'gh' } } },
      rateLimit: { requestsPerMinute: LIMIT },
    }),
    trigger('slack', {
      workflowRef: { name: 'echo' },
      pathSegment: 'slack',
      auth: { method: 'signature', signature: { preset: 'slack', secretRef: { name: 'slack' } } },
      rateLimit: { requestsPerMinute: LIMIT },
    }),
  ];
}

function suite(name: string, start: () => Promise<{ rt: TestRuntime; redis?: Redis }>) {
  describe(name, () => {
    let rt: TestRuntime;
    let redis: Redis | undefined;
    beforeAll(async () => {
      ({ rt, redis } = await start());
      await rt.apply('all.yaml', docs(), ['github', 'bodies', 'slack']);
    }, 60_000);
    afterAll(() => rt?.stop());

    const github = (raw: string, headers: Record<string, string>) =>
      rt.app.inject({
        method: 'POST',
        url: `${base}/github`,
        headers: { 'content-type': 'application/json', ...headers },
        payload: raw,
      });
    const signed = (id: string) => {
      const raw = JSON.stringify({ delivery: id });
      return github(raw, {
        'x-hub-signature-256': githubSignature(SECRET, raw),
        'x-github-delivery': id,
      });
    };

    it('unsigned and badly signed posts consume nothing: the real delivery is accepted', async () => {
      const forged = [
        await github('{"a":1}', {}), // no signature
        await github('{"a":2}', { 'x-hub-signature-256': 'sha256=xyz' }), // malformed
        await github('{"a":3}', { 'x-hub-signature-256': githubSignature('guess', '{"a":3}') }),
        await github('{"a":4}', { 'x-hub-signature-256': githubSignature('guess', '{"a":4}') }),
      ];
      expect(forged.map((r) => typeOf(r))).toEqual([
        `${PROBLEM_BASE}signature-missing`,
        `${PROBLEM_BASE}signature-malformed`,
        `${PROBLEM_BASE}signature-mismatch`,
        `${PROBLEM_BASE}signature-mismatch`,
      ]);
      for (const r of forged) {
        expect(r.statusCode).toBe(401);
        // Nothing was counted, so nothing is announced.
        expect(r.headers['ratelimit-remaining']).toBeUndefined();
      }

      const first = await signed('d-1');
      expect(first.statusCode, first.body).toBe(202);
      expect(first.headers['ratelimit-limit']).toBe(String(LIMIT));
      expect(first.headers['ratelimit-remaining']).toBe(String(LIMIT - 1));
    });

    it("a sender's retry of an accepted delivery gets its first answer, and counts (the limit counts what the sender sent)", async () => {
      const first = await signed('d-1');
      expect(first.statusCode, first.body).toBe(202);
      expect(first.headers['idempotent-replayed']).toBe('true');
      expect(first.headers['ratelimit-remaining']).toBe(String(LIMIT - 2));
    });

    it('correctly signed deliveries are counted: the one past the limit gets 429', async () => {
      const answers = [];
      for (let i = 2; i <= LIMIT; i++) answers.push(await signed(`d-${i}`));
      expect(answers.map((a) => a.statusCode)).toEqual([
        ...Array<number>(LIMIT - 2).fill(202),
        429,
      ]);
      const refused = answers.at(-1)!;
      expect(typeOf(refused)).toBe(`${PROBLEM_BASE}rate-limited`);
      expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(refused.headers['ratelimit-remaining']).toBe('0');
      // Refused, so not received: its replay claim was given back for the sender's retry.
      if (redis) {
        const keys = await redis.keys('hookgate:replay:*');
        expect(keys).toHaveLength(LIMIT - 1);
      }
      // Over the limit, a forged request is still a 401 (not a 429 that tells it the count).
      const forged = await github('{"b":1}', { 'x-hub-signature-256': githubSignature('x', '{}') });
      expect(forged.statusCode).toBe(401);
    });

    it('a signed body that does not parse, and a signed empty body, are counted', async () => {
      const post = (raw: string) =>
        rt.app.inject({
          method: 'POST',
          url: `${base}/bodies`,
          headers: {
            'content-type': 'application/json',
            'x-hub-signature-256': githubSignature(SECRET, raw),
          },
          ...(raw === '' ? {} : { payload: raw }),
        });
      const unparsable = await post('{not json');
      expect(unparsable.statusCode).toBe(400);
      expect(unparsable.headers['ratelimit-remaining']).toBe(String(LIMIT - 1));
      const empty = await post(''); // checked in the handler, not the body parser
      expect(empty.statusCode, empty.body).toBe(202);
      expect(empty.headers['ratelimit-remaining']).toBe(String(LIMIT - 2));
    });

    it('a timestamped scheme (Slack): stale and forged deliveries count for nothing', async () => {
      const post = (raw: string, ts: number, secretText: string) =>
        rt.app.inject({
          method: 'POST',
          url: `${base}/slack`,
          headers: {
            'content-type': 'application/json',
            'x-slack-request-timestamp': String(ts),
            'x-slack-signature': slackSignature(secretText, ts, raw),
          },
          payload: raw,
        });
      const now = Math.floor(Date.now() / 1000);
      const refused = [];
      for (let i = 0; i < LIMIT; i++) refused.push(await post(`{"f":${i}}`, now, 'wrong'));
      refused.push(await post('{"old":1}', now - 3600, SLACK_SECRET));
      for (const r of refused) expect(r.statusCode).toBe(401);
      const answers = [];
      for (let i = 0; i <= LIMIT; i++) answers.push(await post(`{"n":${i}}`, now, SLACK_SECRET));
      expect(answers.map((a) => a.statusCode)).toEqual([...Array<number>(LIMIT).fill(202), 429]);
    });
  });
}

suite('signed endpoint rate limit (memory)', async () => ({ rt: await startRuntime() }));

describe.skipIf(!redisAvailable())('with Redis', () => {
  let server: RedisServer;
  const clients: Redis[] = [];
  const client = () => {
    const redis = new Redis(server.url);
    clients.push(redis);
    return redis;
  };
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await server?.stop();
  });
  suite('signed endpoint rate limit (Redis)', async () => {
    server = await startRedis();
    return { rt: await startRuntime({ redis: client() }), redis: client() };
  });
});
