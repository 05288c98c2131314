// A server that accepts the connection and never answers (or stops halfway) does not
// hold the CLI forever: --request-timeout (HOOKGATE_REQUEST_TIMEOUT, default 30 s, 2 m
// for test) bounds each answer, exit 3 with a sentence; events bounds the stream's
// opening and then its silence (no event, no heartbeat), never its length.
import { createServer, type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { AdminClient } from '../../cli/admin-client.ts';
import { hookgate } from './run.ts';

const servers: ReturnType<typeof createServer>[] = [];
afterEach(() => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    server.close();
  }
});

async function serve(handler: RequestListener): Promise<string> {
  const server = createServer(handler);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Accepts every request and never answers. */
const never: RequestListener = () => undefined;

/** The trigger's OpenAPI document, then the live stream as `stream` writes it. */
function eventsServer(stream: (res: Parameters<RequestListener>[1]) => void): RequestListener {
  return (req, res) => {
    if (req.url?.endsWith('/openapi.json')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ paths: { '/webhook/default_production_orders/in': {} } }));
      return;
    }
    stream(res);
  };
}

describe('client timeouts', { timeout: 120_000 }, () => {
  it('a server that never answers: exit 3 once --request-timeout has passed, or HOOKGATE_REQUEST_TIMEOUT', async () => {
    const server = await serve(never);
    const started = Date.now();
    const [flag, env] = await Promise.all([
      hookgate(['get', 'executions', '--server', server, '--request-timeout', '1s'], {
        timeoutMs: 60_000,
      }),
      hookgate(['replay', 'abc'], {
        env: { HOOKGATE_SERVER: server, HOOKGATE_REQUEST_TIMEOUT: '1.5' },
        timeoutMs: 60_000,
      }),
    ]);
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(flag.code).toBe(3);
    expect(flag.stderr).toContain(
      `hookgate get: no answer from ${server} within 1s (GET /api/executions`,
    );
    expect(flag.stderr).toContain('--request-timeout or HOOKGATE_REQUEST_TIMEOUT to wait longer');
    expect(env.code).toBe(3);
    expect(env.stderr).toContain(`no answer from ${server} within 1500ms`);
  });

  it('an answer whose body stops halfway: exit 3 too (the timeout covers the whole answer)', async () => {
    const server = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"items": [');
    });
    const run = await hookgate(['get', 'triggers', '--server', server, '--request-timeout', '1s'], {
      timeoutMs: 60_000,
    });
    expect(run.code).toBe(3);
    expect(run.stderr).toContain('no answer from');
  });

  it('events: a stream that never opens, or falls silent, exits 3; heartbeats keep one open', async () => {
    const closed = await serve(eventsServer(() => undefined));
    const silent = await serve(
      eventsServer((res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('event: connected\ndata: {}\n\n');
      }),
    );
    const beating = await serve(
      eventsServer((res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('event: connected\ndata: {}\n\n');
        const timer = setInterval(() => res.write(': heartbeat\n\n'), 300);
        res.on('close', () => clearInterval(timer));
      }),
    );
    const args = ['events', 'default/orders', '--request-timeout', '1s'];
    const [opening, quiet, alive] = await Promise.all([
      hookgate([...args, '--server', closed], { timeoutMs: 60_000 }),
      hookgate([...args, '--server', silent], { timeoutMs: 60_000 }),
      // Longer than --request-timeout (and than its silence): no bound on the whole stream.
      hookgate([...args, '--server', beating, '--timeout', '22s'], { timeoutMs: 60_000 }),
    ]);
    expect(opening.code).toBe(3);
    expect(opening.stderr).toContain('no answer from');
    expect(quiet.code).toBe(3);
    // A silence is never read as gone before a heartbeat's period and a margin (20 s),
    // whatever --request-timeout says: 1 s read a quiet, healthy stream as a dead one.
    expect(quiet.stderr).toContain('hookgate events: the event stream was silent for 20s');
    expect(alive.stderr).not.toContain('silent');
    expect(alive.code).toBe(0);
  });

  it('defaults: 30 s, 2 m for test; a value that is no duration is bad usage (exit 2)', async () => {
    const server = 'http://127.0.0.1:1';
    expect(new AdminClient({ server }, {}).timeoutMs).toBe(30_000);
    expect(new AdminClient({ server }, { HOOKGATE_REQUEST_TIMEOUT: '0' }).timeoutMs).toBe(0);
    expect(new AdminClient({ server, 'request-timeout': '2m' }, {}).timeoutMs).toBe(120_000);
    const bad = await hookgate([
      'get',
      'executions',
      '--server',
      server,
      '--request-timeout',
      'soon',
    ]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--request-timeout must be a duration such as 30s, 2m or 1h');
    // Past what a timer can wait (2^31 - 1 ms, about 596 h), Node fires it after 1 ms:
    // such a value is refused, rather than every call timing out at once.
    const slow = await serve((_req, res) => {
      setTimeout(() => res.end('{"items": []}'), 200);
    });
    const huge = await Promise.all([
      hookgate(['get', 'executions', '--server', slow, '--request-timeout', '1000h']),
      hookgate(['get', 'executions', '--server', slow, '--request-timeout', '3000000']),
      hookgate(['events', 'default/orders', '--server', slow, '--timeout', '999h']),
    ]);
    for (const run of huge) {
      expect(run.code, run.stderr).toBe(2);
      expect(run.stderr).toMatch(/(--request-timeout|--timeout) is at most 596h/);
    }
    expect(new AdminClient({ server, 'request-timeout': '596h' }, {}).timeoutMs).toBe(
      2_145_600_000,
    );
    const { TEST_TIMEOUT_MS } = await import('../../cli/commands/test.ts');
    expect(TEST_TIMEOUT_MS).toBe(120_000);
  });
});
