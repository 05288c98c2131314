// A gateway waits for an execution a worker runs (Wait for Completion, SSE Stream) and
// loses its Redis connection; meanwhile the execution succeeds under a Workflow that
// discards such records (ADR 0041), and its events, kept for the handover time only, go
// before the connection is back. The catch-up finds nothing: before 2026-11-28 the
// caller waited until its timeout and got 408 with a link that answers 404. Now it is
// answered at once: 410 execution-discarded when the run came with an Idempotency-Key
// (its tombstone says it succeeded), else 410 execution-result-gone; an SSE Stream ends
// with a last `gone` event carrying that problem. Against a real redis-server, the
// gateway's connections through a fault proxy (reset: down until released), the
// worker's direct. The handover's expiry (5 s) is stood in for by deleting the hash
// once the discard has run.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXECUTION_FIELDS, SINGLE_REDIS_LAYOUT } from '../../runtime/engine/execution-keys.ts';
import { PROBLEM_BASE } from '../../runtime/errors.ts';
import { eventually } from '../support/eventually.ts';
import { startFaultProxy, type FaultProxy } from '../support/fault-proxy.ts';
import { trigger, workflow } from '../support/manifests.ts';
import { startQueueStack, type QueueStack } from '../support/queue-stack.ts';
import { redisAvailable } from '../support/redis.ts';
import { singleRedis, type RedisBackend } from '../support/redis-backends.ts';
import { collect } from '../support/sse.ts';

const wf = '/webhook/default_production_slow';
const MODES = [
  ['wait', 'waitForCompletion'],
  ['stream', 'sseStream'],
] as const;
/** The endpoints' timeout: the answer must come well before it. */
const TIMEOUT_MS = 8_000;

describe.skipIf(!redisAvailable())(
  'a waiting caller whose execution is gone when its gateway is back on Redis',
  () => {
    let backend: RedisBackend;
    let proxy: FaultProxy;
    let stack: QueueStack;
    let base = '';

    beforeAll(async () => {
      backend = await singleRedis();
      proxy = await startFaultProxy({ port: Number(new URL(backend.url).port) });
      const viaProxy = new Redis(proxy.port, '127.0.0.1');
      viaProxy.on('error', () => {}); // the resets
      stack = await startQueueStack({
        backend,
        manifests: {
          file: 'slow.yaml',
          docs: [
            workflow('slow', {
              // Long enough for the test to cut the gateway off while it runs.
              nodes: [
                { id: 'pause', type: 'delay', duration: '600ms' },
                { id: 'out', type: 'transform', expression: '{ "done": true }' },
              ],
              executionRecords: { succeeded: 'Discard' },
            }),
            ...MODES.map(([segment, mode]) =>
              trigger(segment, {
                workflowRef: { name: 'slow' },
                pathSegment: segment,
                response: { mode },
                timeout: `${TIMEOUT_MS / 1000}s`,
              }),
            ),
          ],
          ready: MODES.map(([segment]) => segment),
        },
        gateway: { redis: viaProxy },
        worker: { blockMs: 100 },
      });
      ({ base } = stack);
    }, 60_000);
    afterAll(async () => {
      proxy?.set({ kind: 'pass' });
      await stack?.close();
      await proxy?.close();
      await backend?.stop();
    });

    const post = (segment: string, headers: Record<string, string> = {}) =>
      fetch(`${base}${wf}/${segment}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ n: 1 }),
      });

    /**
     * Once the gateway listens for the request's execution, cuts it off Redis until the
     * execution has succeeded, been discarded and its kept events have gone; then lets
     * it back. Resolves with the execution's id.
     */
    async function goneWhileCutOff(): Promise<string> {
      const channel = await eventually(async () => {
        const channels = (await backend.client.call(
          'PUBSUB',
          'SHARDCHANNELS',
          '*:exec:*:events',
        )) as string[];
        expect(channels).toHaveLength(1);
        return channels[0] as string;
      });
      const id = (/:exec:(.+):events$/.exec(channel) as RegExpExecArray)[1] as string;
      const key = SINGLE_REDIS_LAYOUT.of(id).execution(id);
      expect(await backend.client.hget(key, EXECUTION_FIELDS.record)).not.toBeNull();
      proxy.set({ kind: 'reset' });
      // Discarded (watched: its events stay for the handover, the record goes), its end
      // published to nobody.
      await eventually(async () =>
        expect(await backend.client.hget(key, EXECUTION_FIELDS.record)).toBeNull(),
      );
      await backend.client.del(key); // the handover's expiry
      proxy.set({ kind: 'pass' });
      return id;
    }

    it('Wait for Completion: 410 execution-result-gone at once, not 408 at the timeout', async () => {
      const started = Date.now();
      const answer = post('wait');
      const id = await goneWhileCutOff();
      const res = await answer;
      expect(Date.now() - started).toBeLessThan(TIMEOUT_MS / 2);
      expect(res.status).toBe(410);
      expect(await res.json()).toMatchObject({
        type: `${PROBLEM_BASE}execution-result-gone`,
        code: 'HG_ERR_EXECUTION_RESULT_GONE',
        executionId: id,
      });
    });

    it('Wait for Completion with an Idempotency-Key: its tombstone says it succeeded: 410 execution-discarded, kept under the key', async () => {
      const answer = post('wait', { 'idempotency-key': 'gone-1' });
      const id = await goneWhileCutOff();
      const res = await answer;
      expect(res.status).toBe(410);
      const problem = (await res.json()) as Record<string, unknown>;
      expect(problem).toMatchObject({
        type: `${PROBLEM_BASE}execution-discarded`,
        executionId: id,
      });
      expect(typeof problem.finishedAt).toBe('string');
      const replayed = await post('wait', { 'idempotency-key': 'gone-1' });
      expect(replayed.status).toBe(410);
      expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    });

    it('SSE Stream: ends with a last `gone` event carrying the problem', async () => {
      const started = Date.now();
      const res = await post('stream');
      expect(res.status).toBe(200);
      const frames = collect(res);
      const id = await goneWhileCutOff();
      const got = await frames;
      expect(Date.now() - started).toBeLessThan(TIMEOUT_MS / 2);
      expect(got.at(-1)?.event).toBe('gone');
      expect(JSON.parse(got.at(-1)?.data ?? '{}')).toMatchObject({
        type: `${PROBLEM_BASE}execution-result-gone`,
        status: 410,
        executionId: id,
      });
    });
  },
);
