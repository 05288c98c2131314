// hookgate events: what it prints of the stream and of the route it follows.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { eventLine, routePath } from '../../cli/commands/events.ts';
import { hookgate } from './run.ts';

describe('hookgate events', () => {
  it('names the route as get triggers and the dashboard do, parameters as :name', () => {
    expect(routePath('/webhook/default_staging_payments/notify/{provider}')).toBe(
      '/webhook/default_staging_payments/notify/:provider',
    );
    expect(routePath('/webhook/a/{x}/b/{y}')).toBe('/webhook/a/:x/b/:y');
    expect(routePath('/webhook/default_development_hello/default')).toBe(
      '/webhook/default_development_hello/default',
    );
  });

  it('prints a response on one line with its status, latency, execution and consumer', () => {
    const line = eventLine({
      event: 'response',
      data: JSON.stringify({
        at: '2026-11-27T21:00:00.000Z',
        method: 'POST',
        path: '/webhook/x/default',
        statusCode: 202,
        latencyMs: 3,
        requestId: 'r-1',
        executionId: 'e-1',
        consumer: 'acme',
      }),
    });
    expect(line).toContain('response 202 POST /webhook/x/default 3ms id=r-1');
    expect(line).toContain('execution=e-1');
    expect(line).toContain('consumer=acme');
    // Not JSON: printed as it came.
    expect(eventLine({ event: 'odd', data: 'not json' })).toBe('odd not json');
  });
});

describe('hookgate events against a server that ends the stream', { timeout: 180_000 }, () => {
  it('exits 3 saying so, after printing what came; --count reached first is exit 0', async () => {
    const server = createServer((req, res) => {
      if (req.url?.endsWith('/openapi.json')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ paths: { '/webhook/default-production-orders/in': {} } }));
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('event: connected\ndata: {}\n\n');
      res.end('event: request\ndata: {"method":"POST","path":"/in","requestId":"r1"}\n\n');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const env = { HOOKGATE_SERVER: `http://127.0.0.1:${port}` };
      const [closed, counted] = await Promise.all([
        hookgate(['events', 'default/orders'], { env }),
        hookgate(['events', 'default/orders', '-c', '1'], { env }),
      ]);
      expect(closed.stdout).toContain('request  POST /in id=r1');
      expect(closed.stderr).toContain('hookgate events: the server closed the event stream');
      expect(closed.code).toBe(3);
      expect(counted.code).toBe(0);
    } finally {
      server.close();
    }
  });
});
