// Known traffic for the analytics tests: 1,000 production requests across three
// endpoints of two applications, plus 100 staging requests, with set statuses,
// latencies and consumers, so every figure has a value computed by hand below.
import { MemoryAnalytics } from '../../runtime/analytics/memory.ts';
import type { RequestObservation } from '../../runtime/gateway/observations.ts';

interface Spec {
  application: string;
  environment: string;
  method: string;
  route: string;
  statusCode: number;
  count: number;
  durationSeconds: number;
  consumers: (string | undefined)[];
}

export const ORDERS = '/webhook/shop_production_orders/ingest';
export const STATUS = '/webhook/shop_production_orders/default';
export const INVOICES = '/webhook/billing_production_invoices/notify';
export const STAGING = '/webhook/shop_staging_orders/ingest';

export function knownSpecs(prefix = ''): Spec[] {
  const shop = `${prefix}shop`;
  const billing = `${prefix}billing`;
  const prod = (s: Omit<Spec, 'environment'>): Spec => ({ ...s, environment: 'production' });
  return [
    prod({
      application: shop,
      method: 'POST',
      route: ORDERS,
      statusCode: 202,
      count: 480,
      durationSeconds: 0.01,
      consumers: ['acme', 'globex'],
    }),
    prod({
      application: shop,
      method: 'POST',
      route: ORDERS,
      statusCode: 500,
      count: 20,
      durationSeconds: 0.25,
      consumers: ['acme', 'globex'],
    }),
    prod({
      application: shop,
      method: 'GET',
      route: STATUS,
      statusCode: 200,
      count: 290,
      durationSeconds: 0.04,
      consumers: [undefined],
    }),
    prod({
      application: shop,
      method: 'GET',
      route: STATUS,
      statusCode: 408,
      count: 10,
      durationSeconds: 5,
      consumers: [undefined],
    }),
    prod({
      application: billing,
      method: 'POST',
      route: INVOICES,
      statusCode: 200,
      count: 150,
      durationSeconds: 0.1,
      consumers: ['initech'],
    }),
    prod({
      application: billing,
      method: 'POST',
      route: INVOICES,
      statusCode: 429,
      count: 40,
      durationSeconds: 0.001,
      consumers: ['initech'],
    }),
    prod({
      application: billing,
      method: 'POST',
      route: INVOICES,
      statusCode: 401,
      count: 10,
      durationSeconds: 0.002,
      consumers: [undefined],
    }),
    {
      application: shop,
      environment: 'staging',
      method: 'POST',
      route: STAGING,
      statusCode: 503,
      count: 100,
      durationSeconds: 0.5,
      consumers: ['acme'],
    },
  ];
}

/** The known traffic; `at(i)` gives the arrival time of the i-th request. */
export function knownTraffic(at: (i: number) => number, prefix = ''): RequestObservation[] {
  const out: RequestObservation[] = [];
  for (const spec of knownSpecs(prefix)) {
    for (let n = 0; n < spec.count; n += 1) {
      const i = out.length;
      const consumer = spec.consumers[n % spec.consumers.length];
      out.push({
        at: at(i),
        application: spec.application,
        environment: spec.environment,
        workflowId: spec.route.split('/')[2] as string,
        triggerKey: `default/${spec.route.split('/')[3]}`,
        method: spec.method,
        route: spec.route,
        statusCode: spec.statusCode,
        ...(consumer === undefined ? {} : { consumer }),
        durationSeconds: spec.durationSeconds,
        ...(spec.statusCode >= 400 && spec.statusCode !== 408
          ? {
              problem:
                spec.statusCode === 429
                  ? ('HG_ERR_RATE_LIMITED' as const)
                  : spec.statusCode === 401
                    ? ('HG_ERR_CREDENTIALS_MISSING' as const)
                    : ('HG_ERR_EXECUTION_FAILED' as const),
            }
          : spec.statusCode === 408
            ? { problem: 'HG_ERR_REQUEST_TIMEOUT' as const }
            : {}),
        correlationId: `c-${i}`,
        requestId: `r-${i}`,
      });
    }
  }
  return out;
}

/** An in-memory analytics backend holding the known traffic, all of it arrived 10 s ago. */
export function analyticsOfKnownTraffic(): MemoryAnalytics {
  const backend = new MemoryAnalytics();
  const now = Date.now();
  knownTraffic(() => now - 10_000).forEach((o) => backend.observe(o));
  return backend;
}

/** A deterministic pseudo-random sequence (mulberry32) for generated traffic. */
export function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Mixed traffic with log-uniform latencies from 1 ms to ~3 s. */
export function randomTraffic(
  count: number,
  seed: number,
  at: (i: number) => number,
  application = 'mixed',
): RequestObservation[] {
  const rnd = random(seed);
  const routes = ['/webhook/a/ingest', '/webhook/b/notify', '/webhook/c/callback', 'unmatched'];
  const methods = ['GET', 'POST', 'PUT', 'DELETE'];
  const statuses = [200, 200, 200, 202, 202, 404, 429, 500, 503, 408];
  const consumers = [undefined, 'acme', 'globex', 'initech', 'umbrella'];
  const out: RequestObservation[] = [];
  for (let i = 0; i < count; i += 1) {
    const route = routes[Math.floor(rnd() * routes.length)] as string;
    const consumer = consumers[Math.floor(rnd() * consumers.length)];
    out.push({
      at: at(i),
      application,
      environment: 'development',
      workflowId: route.split('/')[2] ?? '',
      triggerKey: '',
      method: methods[Math.floor(rnd() * methods.length)] as string,
      route,
      statusCode: statuses[Math.floor(rnd() * statuses.length)] as number,
      ...(consumer === undefined ? {} : { consumer }),
      durationSeconds: 0.001 * Math.exp(rnd() * Math.log(3000)),
      correlationId: `c-${i}`,
      requestId: `r-${i}`,
    });
  }
  return out;
}
