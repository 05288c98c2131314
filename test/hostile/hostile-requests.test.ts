// Property: whatever bytes a client sends, the embedded server (the dev runtime on a
// loopback port) neither crashes nor answers 5xx nor hangs, every 4xx it answers is a
// problem document from the catalogue, and its memory stays bounded.
//
// fast-check generates batches of hostile requests (generators.ts), each sent over its
// own TCP socket (raw-client.ts): malformed request lines and methods, odd paths,
// huge, duplicated or invalid headers, bad chunking, gzip claims, deep JSON, 1e309,
// invalid UTF-8, bodies over the limit, and deliveries that are slow, cut or aborted.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CATALOGUE } from '../../runtime/errors.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { secret, trigger, workflow } from '../support/manifests.ts';
import { describeRequest, hostileRequest, toBytes, type HostileRequest } from './generators.ts';
import { rawRequest, type RawAnswer } from './raw-client.ts';

const RUNS = Number(process.env.HOSTILE_RUNS ?? 25);
const BATCH = Number(process.env.HOSTILE_BATCH ?? 200);
const CONCURRENCY = 48;
const ANSWER_TIMEOUT_MS = 10_000;
/**
 * Memory after GC may grow by this much over the whole run. The heap bound catches a
 * leak (it measured 2 MiB for 5,000 and for 10,500 requests); RSS also holds the
 * allocator's high-water mark of concurrent 40 KiB headers and 200 KiB bodies (about
 * 110-125 MiB whether 5,000 or 10,500 requests), so its bound is looser.
 */
const HEAP_BOUND = 16 * 1024 * 1024;
const RSS_BOUND = 192 * 1024 * 1024;

const TYPES = new Map(
  Object.values(CATALOGUE).map((e) => [`https://hookgate.dev/problems/${e.type}`, e]),
);

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

interface Stats {
  requests: number;
  answered: number;
  problems4xx: number;
  nonProblem4xx: number;
  status5xx: number;
  noAnswer: number;
  hangs: number;
  byStatus: Record<string, number>;
  failures: string[];
}

function check(request: HostileRequest, answer: RawAnswer, stats: Stats): void {
  stats.requests++;
  const fail = (why: string) => {
    if (stats.failures.length < 10) stats.failures.push(`${why}: ${describeRequest(request)}`);
  };
  if (answer.timedOut) {
    stats.hangs++;
    fail('no answer and no close within the timeout');
    return;
  }
  if (answer.status === undefined) {
    // A cut or aborted request may be dropped without an answer; a whole one may not.
    stats.noAnswer++;
    if (request.delivery.kind === 'whole' || request.delivery.kind === 'pieces') {
      fail('closed without an answer');
    }
    return;
  }
  stats.answered++;
  stats.byStatus[answer.status] = (stats.byStatus[answer.status] ?? 0) + 1;
  if (answer.status >= 500) {
    stats.status5xx++;
    fail(`answered ${answer.status} ${answer.body.toString('utf8').slice(0, 200)}`);
    return;
  }
  if (answer.status < 400) return;
  const contentType = answer.headers['content-type'] ?? '';
  const head = request.method === 'HEAD';
  let ok = contentType.startsWith('application/problem+json');
  if (ok && !head) {
    try {
      const doc = JSON.parse(answer.body.toString('utf8')) as Record<string, unknown>;
      const entry = TYPES.get(String(doc.type));
      ok =
        entry !== undefined &&
        doc.status === answer.status &&
        doc.title === entry.title &&
        typeof doc.detail === 'string';
    } catch {
      ok = false;
    }
  }
  if (ok) stats.problems4xx++;
  else {
    stats.nonProblem4xx++;
    fail(
      `${answer.status} not a problem document (${contentType}): ${answer.body.toString('latin1').slice(0, 200)}`,
    );
  }
}

async function pool<T>(items: T[], limit: number, run: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) await run(items[next++] as T);
  });
  await Promise.all(workers);
}

describe('hostile requests over raw sockets', () => {
  let runtime: TestRuntime;
  let crashes = 0;
  const onCrash = () => crashes++;
  let gatewayPort = 0;
  let adminPort = 0;

  beforeAll(async () => {
    // Client and server share this process: an error thrown on a server socket lands here.
    process.on('uncaughtException', onCrash);
    process.on('unhandledRejection', onCrash);
    runtime = await startRuntime({
      // Short timeouts: cut requests are answered 408 within about a second.
      limits: { requestTimeout: 1_500, headersTimeout: 1_000, connectionsCheckingInterval: 100 },
    });
    await runtime.apply(
      'fuzz.yaml',
      [
        secret('fuzz-keys', { client: 'fuzz-key-0001' }),
        workflow('fuzz', {
          nodes: [{ id: 'echo', type: 'transform', expression: '{ "n": body.n }' }],
        }),
        trigger('open', {
          workflowRef: { name: 'fuzz' },
          pathSegment: 'open',
          methods: ['POST', 'PUT', 'PATCH', 'DELETE', 'GET', 'HEAD'],
          maxBodyBytes: 64 * 1024,
        }),
        trigger('wait', {
          workflowRef: { name: 'fuzz' },
          pathSegment: 'wait',
          timeout: '5s',
          response: { mode: 'waitForCompletion' },
          inputLimits: { maxDepth: 16, maxKeys: 500 },
        }),
        trigger('keyed', {
          workflowRef: { name: 'fuzz' },
          pathSegment: 'keyed',
          auth: {
            method: 'apiKey',
            apiKey: { header: 'X-API-Key', secretRef: { name: 'fuzz-keys' } },
          },
        }),
      ],
      ['open', 'wait', 'keyed'],
    );
    await runtime.app.listen({ port: 0, host: '127.0.0.1' });
    gatewayPort = (runtime.app.server.address() as AddressInfo).port;
    const admin = (runtime as { admin?: FastifyInstance }).admin;
    if (admin && admin !== runtime.app) {
      await admin.listen({ port: 0, host: '127.0.0.1' });
      adminPort = (admin.server.address() as AddressInfo).port;
    } else adminPort = gatewayPort;
  });

  afterAll(async () => {
    process.off('uncaughtException', onCrash);
    process.off('unhandledRejection', onCrash);
    const admin = (runtime as { admin?: FastifyInstance } | undefined)?.admin;
    admin?.server.closeAllConnections();
    await runtime?.stop();
  });

  it('never crashes, never answers 5xx, never hangs, and answers 4xx with catalogued problems', async () => {
    const stats: Stats = {
      requests: 0,
      answered: 0,
      problems4xx: 0,
      nonProblem4xx: 0,
      status5xx: 0,
      noAnswer: 0,
      hangs: 0,
      byStatus: {},
      failures: [],
    };
    const send = async (request: HostileRequest) => {
      const port = request.target === 'admin' ? adminPort : gatewayPort;
      const answer = await rawRequest(port, toBytes(request), request.delivery, {
        head: request.method === 'HEAD',
        timeoutMs: ANSWER_TIMEOUT_MS,
      });
      check(request, answer, stats);
    };
    // Warm up, then measure memory from a settled start.
    await pool(fc.sample(hostileRequest, { numRuns: 500, seed: 1 }), CONCURRENCY, send);
    gc();
    const rssBefore = process.memoryUsage().rss;
    const heapBefore = process.memoryUsage().heapUsed;
    const started = performance.now();
    await fc.assert(
      fc.asyncProperty(
        fc.array(hostileRequest, { minLength: BATCH, maxLength: BATCH }),
        async (batch) => {
          const failuresBefore = stats.failures.length;
          await pool(batch, CONCURRENCY, send);
          // The server still answers a plain request after each batch.
          const alive = await fetch(
            `http://127.0.0.1:${gatewayPort}/webhook/default_production_fuzz/open`,
            {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: '{"n":1}',
            },
          );
          expect(alive.status).toBe(202);
          expect(stats.failures.slice(failuresBefore)).toEqual([]);
        },
      ),
      {
        numRuns: RUNS,
        endOnFailure: true,
        seed: Number(process.env.HOSTILE_SEED ?? Date.now() % 1e9),
      },
    );
    const seconds = (performance.now() - started) / 1000;
    gc();
    const rssGrowth = process.memoryUsage().rss - rssBefore;
    const heapGrowth = process.memoryUsage().heapUsed - heapBefore;
    console.log(
      `hostile requests: ${stats.requests} in ${seconds.toFixed(1)} s; answered ${stats.answered}, ` +
        `crashes ${crashes}, 4xx problem documents ${stats.problems4xx}/${stats.problems4xx + stats.nonProblem4xx}, 5xx ${stats.status5xx}, ` +
        `dropped cut/aborted ${stats.noAnswer}, hangs ${stats.hangs}; RSS growth ${(rssGrowth / 2 ** 20).toFixed(1)} MiB, ` +
        `heap growth ${(heapGrowth / 2 ** 20).toFixed(1)} MiB; ` +
        `statuses ${JSON.stringify(stats.byStatus)}`,
    );
    expect(stats.failures).toEqual([]);
    expect(crashes).toBe(0);
    expect(stats.status5xx).toBe(0);
    expect(stats.nonProblem4xx).toBe(0);
    expect(stats.hangs).toBe(0);
    expect(stats.requests).toBeGreaterThanOrEqual(RUNS * BATCH);
    expect(heapGrowth).toBeLessThan(HEAP_BOUND);
    expect(rssGrowth).toBeLessThan(RSS_BOUND);
  }, 180_000);
});
