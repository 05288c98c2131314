// hookgate events: what it prints of the stream and of the route it follows.
import { describe, expect, it } from 'vitest';
import { eventLine, routePath } from '../../cli/commands/events.ts';

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
