// The six response modes in the distributed shape: a gateway that queues executions in
// a real redis-server and a worker that runs them (the reconcile loop writes the routes
// to Redis). Each mode must answer as it does with the in-process engine
// (test/gateway/response-modes.test.ts), though the run happens in another component.
// The same on a real Redis Cluster of three masters with six queue shards (ADR 0021).
import { createHash } from 'node:crypto';
import { EXECUTION_FIELDS, ExecutionLayout } from '../../runtime/engine/execution-keys.ts';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../support/eventually.ts';
import { trigger, workflow } from '../support/manifests.ts';
import { startReceiver } from '../support/receiver.ts';
import { redisAvailable } from '../support/redis.ts';
import { redisCluster, singleRedis } from '../support/redis-backends.ts';
import { startQueueStack, type QueueStack } from '../support/queue-stack.ts';
import { collect } from '../support/sse.ts';

const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const wf = '/webhook/default_production_steps';
const MODES = [
  ['ack', 'immediateAck'],
  ['callback', 'asyncCallback'],
  ['subscribe', 'ackSubscribe'],
  ['wait', 'waitForCompletion'],
  ['stream', 'sseStream'],
  ['node', 'waitForResponseNode'],
] as const;

/** Triggers of a workflow that discards the records of its succeeded executions (ADR 0041). */
const QUICK = '/webhook/default_production_quick';
const DISCARD_MODES = [
  ['dack', 'immediateAck'],
  ['dcallback', 'asyncCallback'],
  ['dwait', 'waitForCompletion'],
  ['dstream', 'sseStream'],
  ['dsub', 'ackSubscribe'],
] as const;

interface Accepted {
  executionId: string;
  links: { self: string; events: string };
}

for (const [name, start, queueShards] of [
  ['one Redis', singleRedis, 1],
  ['a Redis Cluster of 3 masters, 6 shards', redisCluster, 6],
] as const)
  describe.skipIf(!redisAvailable())(
    `response modes through the Redis queue and a worker on ${name}`,
    () => {
      let stack: QueueStack;
      let receiver: Awaited<ReturnType<typeof startReceiver>>;
      let base = '';
      /** The gateway's admin listener (executions). */
      let admin = '';

      beforeAll(async () => {
        receiver = await startReceiver();
        const outbound = { allow: [`127.0.0.1:${receiver.port}`] };
        stack = await startQueueStack({
          backend: start,
          manifests: {
            file: 'modes.yaml',
            docs: [
              workflow('steps', {
                nodes: [
                  { id: 'first', type: 'transform', expression: '{ "n": body.n }' },
                  {
                    id: 'answer',
                    type: 'respond',
                    statusCode: 201,
                    expression: '{ "accepted": n }',
                  },
                  { id: 'pause', type: 'delay', duration: '100ms' },
                  {
                    id: 'last',
                    type: 'transform',
                    expression: '{ "n": $nodes.first.n, "done": true }',
                  },
                ],
              }),
              ...MODES.map(([segment, mode]) =>
                trigger(segment, {
                  workflowRef: { name: 'steps' },
                  pathSegment: segment,
                  response: { mode },
                }),
              ),
              // One quick node: the worker ends it within a round trip or two of the enqueue,
              // often before the gateway listens.
              workflow('quick', {
                nodes: [
                  { id: 'only', type: 'transform', expression: '{ "n": body.n, "quick": true }' },
                ],
                executionRecords: { succeeded: 'Discard' },
              }),
              ...DISCARD_MODES.map(([segment, mode]) =>
                trigger(segment, {
                  workflowRef: { name: 'quick' },
                  pathSegment: segment,
                  response: { mode },
                }),
              ),
              // Discard, a respond node on one branch only: a run down the other reaches none.
              workflow('branchy', {
                nodes: [
                  { id: 'check', type: 'if', condition: 'body.answer', else: 'last' },
                  { id: 'answer', type: 'respond', statusCode: 201, expression: '{ "ok": true }' },
                  { id: 'last', type: 'transform', expression: '{ "n": $trigger.body.n }' },
                ],
                executionRecords: { succeeded: 'Discard' },
              }),
              trigger('dnode', {
                workflowRef: { name: 'branchy' },
                pathSegment: 'dnode',
                response: { mode: 'waitForResponseNode' },
              }),
            ],
            ready: [...MODES, ...DISCARD_MODES, ['dnode']].map(([segment]) => segment),
          },
          gateway: {
            engine: { outbound },
            queueShards,
            // These endpoints have no auth: let their callers' trace context through.
            traceContext: 'all',
          },
          worker: {
            engine: { outbound, callbacks: { secret: SECRET, backoffMs: 20, timeoutMs: 2000 } },
            blockMs: 200,
            queueShards,
          },
        });
        ({ base, admin } = stack);
      }, 60_000);
      afterAll(async () => {
        await stack?.close();
        await receiver?.close();
      });

      const post = (
        segment: string,
        body: unknown = { n: 5 },
        headers: Record<string, string> = {},
        path = wf,
      ) =>
        fetch(`${base}${path}/${segment}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body: JSON.stringify(body),
        });

      it('Immediate ACK: 202 queued; the worker runs it; the gateway serves the record', async () => {
        const res = await post('ack');
        expect(res.status).toBe(202);
        const { executionId, status } = (await res.json()) as {
          executionId: string;
          status: string;
        };
        expect(status).toBe('queued');
        await eventually(async () => {
          const record = await (await fetch(`${admin}/api/executions/${executionId}`)).json();
          expect(record).toMatchObject({ status: 'succeeded', output: { n: 5, done: true } });
        });
      });

      it("Async Callback: the worker POSTs the signed result, with the caller's trace context", async () => {
        const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
        const res = await post(
          'callback',
          { n: 9 },
          {
            'x-callback-url': `${receiver.url}/hook`,
            'x-correlation-id': 'order-9',
            traceparent,
            tracestate: 'rojo=00f067aa0ba902b7',
          },
        );
        expect(res.status).toBe(202);
        const { executionId } = (await res.json()) as { executionId: string };
        const delivery = await eventually(() => {
          const got = receiver.received.find((r) => r.body.includes(executionId));
          if (!got) throw new Error('no delivery yet');
          return got;
        });
        const verified = new Webhook(SECRET).verify(delivery.body, {
          'webhook-id': String(delivery.headers['webhook-id']),
          'webhook-timestamp': String(delivery.headers['webhook-timestamp']),
          'webhook-signature': String(delivery.headers['webhook-signature']),
        });
        expect(verified).toMatchObject({ executionId, status: 'succeeded', output: { n: 9 } });
        // Through the queue to the worker: the services a workflow calls join the trace.
        expect(delivery.headers).toMatchObject({
          traceparent,
          tracestate: 'rojo=00f067aa0ba902b7',
          'x-correlation-id': 'order-9',
        });
      });

      it('Acknowledge + Subscribe: the channel relays every event in order', async () => {
        const res = await post('subscribe');
        expect(res.status).toBe(202);
        const { channel } = (await res.json()) as { channel: { url: string } };
        // On the webhook listener, with the link's token and no admin token.
        const frames = await collect(await fetch(`${base}${channel.url}`));
        expect(frames[0]?.event).toBe('queued');
        expect(frames.at(-1)?.event).toBe('completed');
        expect(JSON.parse(frames.at(-1)?.data ?? '{}')).toMatchObject({
          output: { n: 5, done: true },
        });
        expect(frames.map((f) => Number(f.id))).toEqual(frames.map((_f, i) => i + 1));
        const resumed = await collect(
          await fetch(`${base}${channel.url}`, { headers: { 'last-event-id': '3' } }),
        );
        expect(resumed.map((f) => f.id)).toEqual(frames.slice(3).map((f) => f.id));
        // Every event already received (an EventSource reconnecting after the end): 204.
        const everything = await fetch(`${base}${channel.url}`, {
          headers: { 'last-event-id': String(frames.at(-1)?.id) },
          signal: AbortSignal.timeout(5_000),
        });
        expect(everything.status).toBe(204);
      });

      it('Acknowledge + Subscribe: the worker keeps the link valid; only the digest is stored', async () => {
        const one = (await (await post('subscribe', { n: 6 })).json()) as Accepted;
        const two = (await (await post('subscribe')).json()) as Accepted;
        const token = new URL(one.links.self, base).searchParams.get('token') as string;
        await eventually(async () => {
          const view = await (await fetch(`${base}${one.links.self}`)).json();
          expect(view).toMatchObject({ status: 'succeeded', output: { n: 6, done: true } });
        });
        const layout = new ExecutionLayout({
          shards: queueShards,
          cluster: stack.backend.client.isCluster,
        });
        const execution = layout.of(one.executionId).execution(one.executionId);
        if (queueShards === 1 && !stack.backend.client.isCluster)
          expect(execution).toBe(`hookgate:execution:${one.executionId}`);
        // The whole hash: record and events.
        const stored = JSON.stringify(await stack.redis().hgetall(execution));
        expect(stored).toContain('succeeded');
        expect(stored).toContain(createHash('sha256').update(token).digest('hex'));
        expect(stored).not.toContain(token);
        const adminView = await (await fetch(`${admin}/api/executions/${one.executionId}`)).text();
        expect(adminView).toContain('succeeded');
        expect(adminView).not.toContain(token);
        expect(adminView).not.toContain('accessDigest');
        const otherToken = new URL(two.links.self, base).searchParams.get('token') as string;
        for (const url of [
          `/webhook-executions/${one.executionId}/events?token=${otherToken}`,
          `/webhook-executions/${one.executionId}/events?token=${'x'.repeat(43)}`,
          `/webhook-executions/${one.executionId}/events`,
        ]) {
          const res = await fetch(`${base}${url}`);
          expect(res.status).toBe(404);
          expect(((await res.json()) as { type: string }).type).toMatch(
            /execution-link-not-found$/,
          );
        }
      });

      it('Wait for Completion: 200 with the output the worker produced', async () => {
        const res = await post('wait', { n: 4 });
        expect(res.status).toBe(200);
        expect(await res.json()).toEqual({ n: 4, done: true });
      });

      // Sharded pub/sub: a watched execution's events go to the master of its slot only.
      // PUBLISH sent each of them over the cluster bus to every other node (5+ events
      // per execution, two other masters: 10+ bus messages each).
      if (queueShards > 1)
        it('Wait for Completion on a cluster: events stay on their shard (no PUBLISH over the bus)', async () => {
          const published = () => stack.backend.cluster?.busPublishes() ?? 0;
          const before = await published();
          const answers = await Promise.all(
            Array.from({ length: 20 }, (_, n) => post('wait', { n }).then((r) => r.json())),
          );
          expect(answers).toEqual(Array.from({ length: 20 }, (_, n) => ({ n, done: true })));
          // Gateway heartbeats still PUBLISH (a few); per execution, nothing.
          expect((await published()) - before).toBeLessThan(20);
        });

      it('SSE Stream: progress until the result', async () => {
        const res = await post('stream');
        expect(res.status).toBe(200);
        expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
        const types = (await collect(res)).map((f) => f.event);
        expect(types[0]).toBe('queued');
        expect(types.indexOf('respond')).toBeLessThan(types.indexOf('completed'));
        expect(types.at(-1)).toBe('completed');
      });

      it('Wait for Response Node: the node answers while the workflow goes on', async () => {
        const res = await post('node', { n: 3 });
        expect(res.status).toBe(201);
        expect(await res.json()).toEqual({ accepted: 3 });
        const { items } = (await (
          await fetch(`${admin}/api/executions?trigger=default/node&limit=1`)
        ).json()) as { items: { id: string }[] };
        await eventually(async () => {
          const record = (await (
            await fetch(`${admin}/api/executions/${items[0]?.id}`)
          ).json()) as {
            status: string;
            log: { nodeId: string }[];
          };
          expect(record.status).toBe('succeeded');
          expect(record.log.map((l) => l.nodeId)).toEqual(['first', 'answer', 'pause', 'last']);
        });
      });

      /** The admin API and the caller's link answer 404 for it (and the hash is gone). */
      async function expectDiscarded(executionId: string, link: string): Promise<void> {
        await eventually(async () => {
          const res = await fetch(`${admin}/api/executions/${executionId}`);
          expect(res.status).toBe(404);
          expect(((await res.json()) as { type: string }).type).toMatch(/execution-not-found$/);
        });
        const linked = await fetch(`${base}${link}`);
        expect(linked.status).toBe(404);
        expect(((await linked.json()) as { type: string }).type).toMatch(
          /execution-link-not-found$/,
        );
        const layout = new ExecutionLayout({
          shards: queueShards,
          cluster: stack.backend.client.isCluster,
        });
        const key = layout.of(executionId).execution(executionId);
        // Nobody watched it: gone at once; watched: its events for the handover time.
        await eventually(async () => expect(await stack.redis().exists(key)).toBe(0), 10_000);
      }

      it('Discard, Immediate ACK: runs; once it has succeeded, its link and the admin API answer 404', async () => {
        const res = await post('dack', { n: 2 }, {}, QUICK);
        expect(res.status).toBe(202);
        const { executionId, links } = (await res.json()) as Accepted;
        await expectDiscarded(executionId, links.self);
        const listed = (await (
          await fetch(`${admin}/api/executions?trigger=default/dack`)
        ).json()) as { items: unknown[] };
        expect(listed.items).toEqual([]);
      });

      it('Discard, Wait for Completion: every caller gets its output, however soon the worker ends; nothing is kept', async () => {
        const answers = await Promise.all(
          Array.from({ length: 20 }, (_, n) =>
            post('dwait', { n }, {}, QUICK).then(async (r): Promise<[number, unknown]> => [
              r.status,
              await r.json(),
            ]),
          ),
        );
        expect(answers).toEqual(Array.from({ length: 20 }, (_, n) => [200, { n, quick: true }]));
        const listed = (await (
          await fetch(`${admin}/api/executions?trigger=default/dwait`)
        ).json()) as { items: unknown[] };
        expect(listed.items).toEqual([]);
      });

      it('Discard, Ack + Subscribe: marked watched at the enqueue, so a caller subscribing as it ends still gets the end', async () => {
        const res = await post('dsub', { n: 3 }, {}, QUICK);
        expect(res.status).toBe(202);
        const { executionId } = (await res.json()) as Accepted;
        const layout = new ExecutionLayout({
          shards: queueShards,
          cluster: stack.backend.client.isCluster,
        });
        // Queued, running or just discarded (its events kept for the handover time): the
        // mark is there. Unmarked, a discard between the link's check and its subscription
        // left the caller's stream without history and without end.
        const key = layout.of(executionId).execution(executionId);
        expect(await stack.redis().hget(key, EXECUTION_FIELDS.watched)).toBeTruthy();
      });

      it('Discard, SSE Stream: the stream ends with the result; then the execution is gone', async () => {
        const res = await post('dstream', { n: 8 }, {}, QUICK);
        expect(res.status).toBe(200);
        const link = res.headers.get('location') as string;
        const frames = await collect(res);
        expect(frames.at(-1)?.event).toBe('completed');
        expect(JSON.parse(frames.at(-1)?.data ?? '{}')).toMatchObject({
          output: { n: 8, quick: true },
        });
        const executionId = (JSON.parse(frames.at(-1)?.data ?? '{}') as { executionId: string })
          .executionId;
        await expectDiscarded(executionId, link);
      });

      it('Discard, Wait for Response Node: a run that reaches no respond node (its caller gets the 500) is kept; one that answers is discarded (ADR 0041, amended 2026-11-28 (day))', async () => {
        const BRANCHY = '/webhook/default_production_branchy';
        const res = await post('dnode', { n: 12, answer: false }, {}, BRANCHY);
        expect(res.status).toBe(500);
        const { executionId } = (await res.json()) as { executionId: string };
        // Past its finishing write: the record stays (a discard would have gone by then).
        await new Promise((resolve) => setTimeout(resolve, 200));
        const kept = await fetch(`${admin}/api/executions/${executionId}`);
        expect(kept.status).toBe(200);
        expect(await kept.json()).toMatchObject({ status: 'succeeded', output: { n: 12 } });
        const answered = await post('dnode', { n: 13, answer: true }, {}, BRANCHY);
        expect(answered.status).toBe(201);
        expect(await answered.json()).toEqual({ ok: true });
        await eventually(async () => {
          const listed = (await (
            await fetch(`${admin}/api/executions?trigger=default/dnode`)
          ).json()) as { items: { id: string }[] };
          expect(listed.items.map((e) => e.id)).toEqual([executionId]);
        });
      });

      it('Discard, Async Callback: delivered, then discarded', async () => {
        const res = await post(
          'dcallback',
          { n: 11 },
          { 'x-callback-url': `${receiver.url}/quick` },
          QUICK,
        );
        expect(res.status).toBe(202);
        const { executionId, links } = (await res.json()) as Accepted;
        await eventually(() =>
          expect(receiver.received.some((r) => r.body.includes(executionId))).toBe(true),
        );
        await expectDiscarded(executionId, links.self);
      });
    },
  );
