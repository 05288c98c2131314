// Route records for the gateway-security tests.
import { createHash } from 'node:crypto';
import type { WebhookTriggerSpec } from '../../api/v1alpha1/index.ts';
import type { ResolvedCredentials, RouteRecord } from '../../api/records/records.ts';
import { HttpProblem } from '../../runtime/errors.ts';
import type { EndpointRateLimiter } from '../../runtime/gateway/security/rate-limit.ts';

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

export function makeRoute(
  spec: Partial<WebhookTriggerSpec> = {},
  credentials: ResolvedCredentials = {},
  key = 'shop/orders',
  generation = 1,
): RouteRecord {
  return {
    key,
    namespace: 'shop',
    name: 'orders',
    uid: '00000000-0000-0000-0000-000000000001',
    generation,
    workflowId: 'shop_production_orders',
    path: '/webhook/shop_production_orders/ingest',
    application: 'shop',
    environment: 'production',
    spec: {
      workflowRef: { name: 'orders' },
      pathSegment: 'ingest',
      methods: ['POST'],
      timeout: '30s',
      requireHttps: false,
      maxBodyBytes: 1024 * 1024,
      response: {
        mode: 'immediateAck',
        contentType: 'application/json',
        headers: { correlationId: true, requestId: true, timestamp: false, custom: [] },
      },
      deploy: true,
      ...spec,
    },
    credentials,
  };
}

/** Runs `fn` and returns the HttpProblem it throws (fails the test when it does not). */
export async function problemOf(fn: () => unknown): Promise<HttpProblem> {
  try {
    await fn();
  } catch (error) {
    if (error instanceof HttpProblem) return error;
    throw error;
  }
  throw new Error('expected an HttpProblem, nothing was thrown');
}

/** Fires `n` checks at once and counts outcomes. */
export async function burst(limiters: EndpointRateLimiter[], route: RouteRecord, n: number) {
  const results = await Promise.allSettled(
    Array.from({ length: n }, (_, i) => limiters[i % limiters.length]!.check(route)),
  );
  const admitted = results.filter((r) => r.status === 'fulfilled');
  const rejected = results.flatMap((r) =>
    r.status === 'rejected' && r.reason instanceof HttpProblem ? [r.reason] : [],
  );
  const other = results.filter(
    (r) => r.status === 'rejected' && !(r.reason instanceof HttpProblem),
  );
  return { admitted: admitted.length, rejected, other: other.length };
}
