// An Idempotency-Key retried after its enqueue answered late (the execution was queued
// all the same: test/e2e/idempotent-retry.test.ts), when a worker has run that execution
// meanwhile and its workflow discards the records of succeeded executions (ADR 0041,
// amended 2026-11-28 (night)). The retry resumes the hinted id; the record is gone, so
// without a trace of it the enqueue queued it anew and the workflow ran twice. The
// discard leaves a tombstone for an execution that came with a key, and the enqueue
// that finds it queues nothing: Immediate ACK and Async Callback answer 202 with the
// same id, the modes whose caller wants the result 410 execution-discarded, which the
// key keeps. Against a real redis-server, with a gateway and a worker.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RedisClient } from '../../api/records/redis-client.ts';
import type { Serving } from '../../roles/serving.ts';
import { SINGLE_REDIS_LAYOUT } from '../../runtime/engine/execution-keys.ts';
import { PROBLEM_BASE, StoreUnavailableError } from '../../runtime/errors.ts';
import { DEFAULT_IDEMPOTENCY_WINDOW_MS } from '../../runtime/gateway/idempotency/claims.ts';
import { eventually, sleep } from '../support/eventually.ts';
import { trigger, workflow } from '../support/manifests.ts';
import { startReceiver } from '../support/receiver.ts';
import { startQueueStack, type QueueStack } from '../support/queue-stack.ts';
import { redisAvailable } from '../support/redis.ts';

type Enqueue = (...args: unknown[]) => Promise<unknown>;

const wf = '/webhook/default_production_gone';
const MODES = [
  ['ack', 'immediateAck'],
  ['callback', 'asyncCallback'],
  ['wait', 'waitForCompletion'],
  ['subscribe', 'ackSubscribe'],
  ['stream', 'sseStream'],
] as const;

describe.skipIf(!redisAvailable())(
  'an Idempotency-Key retried after its execution succeeded and was discarded (Redis queue)',
  () => {
    let stack: QueueStack;
    let gateway: Serving;
    let receiver: Awaited<ReturnType<typeof startReceiver>>;
    let requests: RedisClient & { hookgateEnqueue: Enqueue };
    let enqueue: Enqueue;
    let base = '';

    beforeAll(async () => {
      receiver = await startReceiver();
      const outbound = { allow: [`127.0.0.1:${receiver.port}`] };
      stack = await startQueueStack({
        manifests: {
          file: 'gone.yaml',
          docs: [
            workflow('gone', {
              nodes: [{ id: 'call', type: 'http', request: { method: 'POST', url: receiver.url } }],
              executionRecords: { succeeded: 'Discard' },
            }),
            ...MODES.map(([segment, mode]) =>
              trigger(segment, {
                workflowRef: { name: 'gone' },
                pathSegment: segment,
                response: { mode },
              }),
            ),
          ],
          ready: MODES.map(([segment]) => segment),
        },
        gateway: { engine: { outbound } },
        worker: { engine: { outbound }, blockMs: 100 },
      });
      ({ gateway, base } = stack);
      requests = stack.gatewayRedis as typeof requests;
      enqueue = requests.hookgateEnqueue.bind(requests);
    }, 60_000);
    afterAll(async () => {
      await stack?.close();
      await receiver?.close();
    });

    const post = (segment: string, body: unknown, key: string) =>
      fetch(`${base}${wf}/${segment}`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'idempotency-key': key,
          ...(segment === 'callback' ? { 'x-callback-url': `${receiver.url}/called` } : {}),
        },
        body: JSON.stringify(body),
      });

    /** The worker's runs of the request with this `n` (each one calls the receiver). */
    const runs = (n: number) =>
      receiver.received.filter(
        (r) => r.url === '/' && (JSON.parse(r.body) as { body?: { n?: number } }).body?.n === n,
      ).length;

    /**
     * The first request: its enqueue runs in Redis, its caller is told the command timed
     * out (503: the key keeps the hint). Resolves with the id once the worker has run it
     * and its record is gone.
     */
    async function queuedThenDiscarded(segment: string, n: number): Promise<string> {
      let id = '';
      requests.hookgateEnqueue = async (...args: unknown[]) => {
        requests.hookgateEnqueue = enqueue;
        id = args[5] as string;
        await enqueue(...args);
        throw new StoreUnavailableError('Command timed out');
      };
      const first = await post(segment, { n }, `order-${n}`);
      expect(first.status).toBe(503);
      expect(id).not.toBe('');
      await eventually(async () => {
        expect(runs(n)).toBe(1);
        expect(await gateway.engine.get(id)).toBeUndefined();
      });
      return id;
    }

    it('Immediate ACK: the retry gets 202 with the same id, succeeded; nothing runs again; its link answers 404', async () => {
      const id = await queuedThenDiscarded('ack', 1);
      const retried = await post('ack', { n: 1 }, 'order-1');
      await sleep(400); // a job queued anew would have run by now (the worker polls every 100 ms)
      expect(runs(1)).toBe(1);
      expect(retried.status).toBe(202);
      expect(retried.headers.get('idempotent-replayed')).toBeNull();
      const answer = (await retried.json()) as {
        executionId: string;
        status: string;
        links: { self: string };
      };
      expect(answer).toMatchObject({ executionId: id, status: 'succeeded' });
      expect((await fetch(`${base}${answer.links.self}`)).status).toBe(404);
      // The tombstone: the execution's hash is gone, a key of its own lives the key's window.
      const keys = SINGLE_REDIS_LAYOUT.of(id);
      expect(await stack.backend.client.exists(keys.execution(id))).toBe(0);
      const ttl = await stack.backend.client.pttl(keys.tombstone(id));
      expect(ttl).toBeLessThanOrEqual(DEFAULT_IDEMPOTENCY_WINDOW_MS);
      expect(ttl).toBeGreaterThan(DEFAULT_IDEMPOTENCY_WINDOW_MS - 60_000);
      const replayed = await post('ack', { n: 1 }, 'order-1');
      expect(replayed.headers.get('idempotent-replayed')).toBe('true');
      expect(((await replayed.json()) as { executionId: string }).executionId).toBe(id);
    });

    it('Async Callback: 202 with the same id; neither the run nor the callback is repeated', async () => {
      const id = await queuedThenDiscarded('callback', 2);
      const called = () => receiver.received.filter((r) => r.url === '/called').length;
      await eventually(() => expect(called()).toBe(1));
      const retried = await post('callback', { n: 2 }, 'order-2');
      await sleep(400);
      expect(runs(2)).toBe(1);
      expect(called()).toBe(1);
      expect(retried.status).toBe(202);
      expect(await retried.json()).toMatchObject({ executionId: id, status: 'succeeded' });
    });

    for (const [segment, n] of [
      ['wait', 3],
      ['subscribe', 4],
      ['stream', 5],
    ] as const)
      it(`${segment}: the retry gets 410 execution-discarded, kept under the key; nothing runs again`, async () => {
        const id = await queuedThenDiscarded(segment, n);
        const retried = await post(segment, { n }, `order-${n}`);
        await sleep(400);
        expect(runs(n)).toBe(1);
        expect(retried.status).toBe(410);
        expect(retried.headers.get('content-type')).toContain('application/problem+json');
        expect(await retried.json()).toMatchObject({
          type: `${PROBLEM_BASE}execution-discarded`,
          status: 410,
          executionId: id,
        });
        const replayed = await post(segment, { n }, `order-${n}`);
        expect(replayed.status).toBe(410);
        expect(replayed.headers.get('idempotent-replayed')).toBe('true');
        expect(runs(n)).toBe(1);
      });
  },
);
