// What /readyz says through a gateway's life: loading routes, ready, and draining from
// the moment close() begins. The chart probes the metrics listener, which closes only
// after the drain, so readiness itself must say so (not only the closing webhook
// listener's 503s).
import { describe, expect, it } from 'vitest';
import { startRuntime } from '../support/gateway.ts';

describe('readiness', () => {
  it('is ready once the routes are loaded, and not ready from the start of close()', async () => {
    const rt = await startRuntime();
    expect(rt.readiness()).toEqual({ ready: true, status: 'ready' });
    const stopping = rt.stop();
    expect(rt.readiness()).toEqual({ ready: false, status: 'draining' });
    await stopping;
  });
});
