// A gateway whose enqueue did reach Redis but whose answer did not come back in time
// (a command timeout on a Redis that was slow rather than gone) answers 503
// store-unavailable, and the execution is queued all the same. A retry with the same
// Idempotency-Key then gets that execution (202, the same id, links that work), not a
// second one; without a key the retry would start another. Against a real redis-server;
// the late answer is made by letting the real enqueue script run and then failing the
// call as the client's command timeout does (the claim's script likewise).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RedisClient } from '../../api/records/redis-client.ts';
import type { Serving } from '../../roles/serving.ts';
import { PROBLEM_BASE, StoreUnavailableError } from '../../runtime/errors.ts';
import { eventually } from '../support/eventually.ts';
import { trigger, workflow } from '../support/manifests.ts';
import { startQueueStack, type QueueStack } from '../support/queue-stack.ts';
import { redisAvailable } from '../support/redis.ts';

const url = '/webhook/default_production_orders/ingest';

type Enqueue = (...args: unknown[]) => Promise<unknown>;

describe.skipIf(!redisAvailable())(
  'an Idempotency-Key retried after an enqueue answered late',
  () => {
    let stack: QueueStack;
    let gateway: Serving;
    let requests: RedisClient & { hookgateEnqueue: Enqueue; hookgateIdemBegin: Enqueue };
    let enqueue: Enqueue;
    let begin: Enqueue;

    beforeAll(async () => {
      stack = await startQueueStack({
        manifests: {
          file: 'orders.yaml',
          docs: [
            workflow('orders', { nodes: [{ id: 'n', type: 'transform', expression: 'body' }] }),
            // A short timeout: a claim whose answer was lost is in progress for it and
            // CLAIM_LEASE_MARGIN_MS (5 s) more.
            trigger('ingest', { pathSegment: 'ingest', timeout: '1s' }),
            trigger('callback', {
              pathSegment: 'callback',
              timeout: '1s',
              response: { mode: 'asyncCallback' },
            }),
          ],
          ready: ['ingest', 'callback'],
        },
        // Callback URLs on loopback are accepted (nothing runs them: no worker).
        gateway: { engine: { outbound: { allow: ['127.0.0.1:9'] } } },
        // No worker: what the gateway queued stays queued, and is what the test reads.
        listen: false,
      });
      ({ gateway } = stack);
      // The queued engine defined its script on the client.
      requests = stack.gatewayRedis as typeof requests;
      enqueue = requests.hookgateEnqueue.bind(requests);
      begin = requests.hookgateIdemBegin.bind(requests);
    });
    afterAll(() => stack?.close());

    const post = (body: unknown, key?: string) =>
      gateway.app.inject({
        method: 'POST',
        url,
        headers: {
          'content-type': 'application/json',
          ...(key === undefined ? {} : { 'idempotency-key': key }),
        },
        payload: JSON.stringify(body),
      });

    /** The next enqueue runs in Redis, and its caller is told the command timed out. */
    const answerLate = () => {
      requests.hookgateEnqueue = async (...args: unknown[]) => {
        requests.hookgateEnqueue = enqueue;
        await enqueue(...args);
        throw new StoreUnavailableError('Command timed out');
      };
    };

    const queuedWith = async (n: number) =>
      (await gateway.engine.list({ triggerKey: 'default/ingest', limit: 1000 })).filter(
        (e) => (e.input.body as { n?: number }).n === n,
      );

    it('the retry gets the execution the first request queued, once', async () => {
      answerLate();
      const first = await post({ n: 1 }, 'order-1');
      expect(first.statusCode).toBe(503);
      expect(first.json<{ type: string }>().type).toBe(`${PROBLEM_BASE}store-unavailable`);
      const [queued, ...more] = await queuedWith(1);
      expect(queued).toBeDefined();
      expect(more).toEqual([]);

      const retried = await post({ n: 1 }, 'order-1');
      expect(retried.statusCode).toBe(202);
      expect(retried.headers['idempotent-replayed']).toBeUndefined();
      const answer = retried.json<{ executionId: string; links: { self: string } }>();
      expect(answer.executionId).toBe(queued?.id);
      expect((await queuedWith(1)).map((e) => e.id)).toEqual([queued?.id]);
      // Its links carry the token the execution was queued with: they open it.
      const view = await gateway.app.inject({ method: 'GET', url: answer.links.self });
      expect(view.statusCode).toBe(200);
      expect(view.json<{ executionId: string }>().executionId).toBe(queued?.id);

      const replayed = await post({ n: 1 }, 'order-1');
      expect(replayed.headers['idempotent-replayed']).toBe('true');
      expect(replayed.json<{ executionId: string }>().executionId).toBe(queued?.id);
    });

    it('another body under the key given back is refused as a reused key', async () => {
      answerLate();
      expect((await post({ n: 2 }, 'order-2')).statusCode).toBe(503);
      const other = await post({ n: 3 }, 'order-2');
      expect(other.statusCode).toBe(422);
      expect(other.json<{ type: string }>().type).toBe(`${PROBLEM_BASE}idempotency-key-reused`);
      expect(await queuedWith(3)).toEqual([]);
    });

    it("a claim whose answer came too late keeps its key in progress for the endpoint timeout and a margin, not for the key's 24 h", async () => {
      requests.hookgateIdemBegin = async (...args: unknown[]) => {
        requests.hookgateIdemBegin = begin;
        await begin(...args);
        throw new StoreUnavailableError('Command timed out');
      };
      const first = await post({ n: 5 }, 'order-5');
      expect(first.statusCode).toBe(503);
      expect((await post({ n: 5 }, 'order-5')).statusCode).toBe(409);
      expect(await queuedWith(5)).toEqual([]);
      const retried = await eventually(
        async () => {
          const res = await post({ n: 5 }, 'order-5');
          expect(res.statusCode).toBe(202);
          return res;
        },
        15_000,
        250,
      );
      expect(retried.headers['idempotent-replayed']).toBeUndefined();
      expect(await queuedWith(5)).toHaveLength(1);
    }, 30_000);

    it('a retry refused before the engine (here: no callback URL) keeps the hint for the next', async () => {
      const callback = (headers: Record<string, string>) =>
        gateway.app.inject({
          method: 'POST',
          url: '/webhook/default_production_orders/callback',
          headers: { 'content-type': 'application/json', 'idempotency-key': 'order-6', ...headers },
          payload: JSON.stringify({ n: 6 }),
        });
      const target = { 'x-callback-url': 'http://127.0.0.1:9/hook' };
      answerLate();
      expect((await callback(target)).statusCode).toBe(503);
      const [queued, ...more] = (
        await gateway.engine.list({ triggerKey: 'default/callback', limit: 100 })
      ).filter((e) => (e.input.body as { n?: number }).n === 6);
      expect(queued).toBeDefined();
      expect(more).toEqual([]);
      // The same request without its callback URL: 400, before the engine is asked.
      const missing = await callback({});
      expect(missing.statusCode).toBe(400);
      expect(missing.json<{ type: string }>().type).toBe(`${PROBLEM_BASE}callback-url-missing`);
      // Then with it: the execution the first attempt queued, not a second one.
      const retried = await callback(target);
      expect(retried.statusCode).toBe(202);
      expect(retried.json<{ executionId: string }>().executionId).toBe(queued?.id);
      const runs = (
        await gateway.engine.list({ triggerKey: 'default/callback', limit: 100 })
      ).filter((e) => (e.input.body as { n?: number }).n === 6);
      expect(runs.map((e) => e.id)).toEqual([queued?.id]);
    });

    it('without a key the retry starts a second execution (what the key is for)', async () => {
      answerLate();
      expect((await post({ n: 4 })).statusCode).toBe(503);
      expect((await post({ n: 4 })).statusCode).toBe(202);
      expect(await queuedWith(4)).toHaveLength(2);
    });
  },
);
