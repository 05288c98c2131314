// An execution link's event stream whose record goes while it is open, its end never
// published (a Discard workflow's success discarded between the link's check and the
// subscription, ADR 0041; a record dropped by its store's budget): the stream ends at
// the next look instead of staying open until its reader leaves.
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import type { Execution, ExecutionEngine } from '../../runtime/engine/ports.ts';
import {
  EXECUTION_LINK_PREFIX,
  EXECUTION_TOKEN_QUERY,
  executionLinkRoutes,
  mintExecutionToken,
} from '../../runtime/gateway/execution-links.ts';
import { installSse, ProcessStreams } from '../../runtime/gateway/sse.ts';
import { trigger } from '../engine/helpers.ts';

describe('execution link events: a record gone while the stream is open', () => {
  const apps: FastifyInstance[] = [];
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
  });

  it('ends the stream at the next look; the reconnection gets 404', async () => {
    const { token, digest } = mintExecutionToken();
    const execution: Execution = {
      id: 'e-gone',
      workflowId: 'default_production_quick',
      triggerKey: 'default/quick',
      status: 'running',
      createdAt: new Date().toISOString(),
      input: trigger({ n: 1 }, 'e-gone'),
      log: [],
      accessDigest: digest,
    };
    let present = true;
    // Its end is never published: the subscription hears nothing.
    const engine: ExecutionEngine = {
      start: () => Promise.reject(new Error('not used')),
      get: (id) => Promise.resolve(present && id === execution.id ? execution : undefined),
      list: () => Promise.resolve([]),
      page: () => Promise.resolve({ items: [] }),
      subscribe: () => () => {},
    };
    const app = Fastify();
    apps.push(app);
    installSse(app, {
      bufferBytes: 1024 * 1024,
      drainMs: 1000,
      maxPerExecution: 16,
      process: new ProcessStreams(100),
    });
    executionLinkRoutes(app, { engine, heartbeatMs: 50 });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as { port: number };
    const url = `http://127.0.0.1:${port}${EXECUTION_LINK_PREFIX}/e-gone/events?${EXECUTION_TOKEN_QUERY}=${token}`;
    const res = await fetch(url);
    expect(res.status).toBe(200);
    setTimeout(() => {
      present = false;
    }, 100);
    // Read to the end: without the look, this waits for ever (the test's timeout).
    const text = await res.text();
    expect(text).toContain('retry: 3000');
    expect(text).not.toContain('event:');
    expect((await fetch(url)).status).toBe(404);
  }, 5_000);
});
