// The caller's W3C trace context through the gateway (ADR 0033): by default it goes on
// to what a workflow calls only from callers the endpoint authenticates (the W3C
// Recommendation's section 7.2: a public endpoint must not let anyone steer downstream
// sampling); HOOKGATE_TRACE_CONTEXT=all from anyone, off from no one. The correlation
// ID goes on in every case; the accepted context is in $trigger.metadata.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TraceContextPolicy } from '../../runtime/engine/outbound/trace-context.ts';
import { eventually } from '../support/eventually.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { secret, trigger, workflow } from '../support/manifests.ts';
import { startReceiver } from '../support/receiver.ts';

const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
const BASE = '/webhook/default_production_traced';

let receiver: Awaited<ReturnType<typeof startReceiver>>;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(() => receiver.close());

for (const [policy, fromPublic, fromAuthenticated] of [
  [undefined, false, true],
  ['all', true, true],
  ['off', false, false],
] as const) {
  describe(`HOOKGATE_TRACE_CONTEXT=${policy ?? '(unset: authenticated)'}`, () => {
    let rt: TestRuntime;
    beforeAll(async () => {
      rt = await startRuntime({
        engine: { outbound: { allow: [`127.0.0.1:${receiver.port}`] } },
        ...(policy ? { traceContext: policy satisfies TraceContextPolicy } : {}),
      });
      await rt.apply(
        'traced.yaml',
        [
          secret('traced-keys', { acme: 'traced-key-0001' }),
          workflow('traced', {
            nodes: [
              {
                id: 'call',
                type: 'http',
                request: { method: 'POST', url: `http://127.0.0.1:${receiver.port}/downstream` },
              },
              { id: 'seen', type: 'transform', expression: '$trigger.metadata' },
            ],
          }),
          trigger('public', {
            workflowRef: { name: 'traced' },
            pathSegment: 'public',
            response: { mode: 'waitForCompletion' },
          }),
          trigger('keyed', {
            workflowRef: { name: 'traced' },
            pathSegment: 'keyed',
            response: { mode: 'waitForCompletion' },
            auth: { method: 'apiKey', apiKey: { secretRef: { name: 'traced-keys' } } },
          }),
        ],
        ['public', 'keyed'],
      );
    });
    afterAll(() => rt.stop());

    /** Calls the endpoint with a trace context; what the downstream service got. */
    async function call(segment: string, correlation: string) {
      const res = await rt.app.inject({
        method: 'POST',
        url: `${BASE}/${segment}`,
        headers: {
          'content-type': 'application/json',
          'x-api-key': 'traced-key-0001',
          'x-correlation-id': correlation,
          traceparent: TRACEPARENT,
          tracestate: 'rojo=00f067aa0ba902b7',
        },
        payload: '{}',
      });
      expect(res.statusCode).toBe(200);
      const metadata = res.json<{ traceparent?: string; tracestate?: string }>();
      const got = await eventually(() => {
        const r = receiver.received.find((x) => x.headers['x-correlation-id'] === correlation);
        if (!r) throw new Error('not received yet');
        return r;
      });
      return { metadata, headers: got.headers };
    }

    it(`a public endpoint's caller: ${fromPublic ? 'passed on' : 'not passed on'}`, async () => {
      const { metadata, headers } = await call('public', `public-${policy ?? 'default'}`);
      expect(headers.traceparent).toBe(fromPublic ? TRACEPARENT : undefined);
      expect(headers.tracestate).toBe(fromPublic ? 'rojo=00f067aa0ba902b7' : undefined);
      expect(metadata.traceparent).toBe(fromPublic ? TRACEPARENT : undefined);
    });

    it(`an authenticated caller: ${fromAuthenticated ? 'passed on' : 'not passed on'}`, async () => {
      const { metadata, headers } = await call('keyed', `keyed-${policy ?? 'default'}`);
      expect(headers.traceparent).toBe(fromAuthenticated ? TRACEPARENT : undefined);
      expect(metadata).toMatchObject(
        fromAuthenticated ? { traceparent: TRACEPARENT, tracestate: 'rojo=00f067aa0ba902b7' } : {},
      );
      if (!fromAuthenticated) expect(metadata.traceparent).toBeUndefined();
    });
  });
}
