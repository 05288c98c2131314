// Fastify's per-request log lines (LOG_LEVEL=debug) name the request by its path only:
// a query string may carry a credential (an execution link's token, an Async Callback's
// URL with the receiver's token), and log lines are read by more people than callers.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { createHttpApp } from '../../runtime/http-app.ts';

describe('per-request log lines at debug', () => {
  it('carry the path, never the query string', async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'debug' }, { write: (line: string) => lines.push(line) });
    const { app } = createHttpApp({ logger });
    app.get('/webhook-executions/:id', () => 'ok');
    try {
      await app.inject({
        method: 'GET',
        url: '/webhook-executions/e-1?token=CAPABILITY-TOKEN&callback=https%3A%2F%2Fx%2F%3Fk%3DRECEIVER-KEY',
      });
    } finally {
      await app.close();
    }
    const incoming = lines
      .map((line) => JSON.parse(line) as { msg: string; req?: { method: string; url: string } })
      .find((line) => line.msg === 'incoming request');
    expect(incoming?.req).toMatchObject({ method: 'GET', url: '/webhook-executions/e-1' });
    const text = lines.join('');
    expect(text).not.toContain('CAPABILITY-TOKEN');
    expect(text).not.toContain('RECEIVER-KEY');
  });
});
