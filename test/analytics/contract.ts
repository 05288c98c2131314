// The analytics backend contract: the same known traffic, the same questions and the
// same answers, whichever backend records and answers them.
import { beforeAll, describe, expect, it } from 'vitest';
import type { AnalyticsBackend, AnalyticsFilter } from '../../runtime/analytics/backend.ts';
import type { RequestObservation } from '../../runtime/gateway/observations.ts';
import { INVOICES, knownTraffic, ORDERS, STAGING, STATUS } from './traffic.ts';

export interface ContractHarness {
  backend: AnalyticsBackend;
  /** Feed the observations (arriving now) into the backend's data source. */
  record(observations: RequestObservation[]): void;
  /** Resolve once the backend answers for everything recorded so far. */
  settle(filter: AnalyticsFilter, expectedTotal: number): Promise<void>;
}

export function analyticsContract(name: string, harness: () => Promise<ContractHarness>): void {
  describe(`analytics contract: ${name}`, () => {
    const prefix = `${name}-`;
    const shop = `${prefix}shop`;
    const billing = `${prefix}billing`;
    let backend: AnalyticsBackend;
    const filter = (extra: Partial<AnalyticsFilter> = {}): AnalyticsFilter => ({
      applications: [shop, billing],
      environment: 'production',
      window: '15m',
      ...extra,
    });

    beforeAll(async () => {
      const h = await harness();
      backend = h.backend;
      const now = Date.now();
      h.record(knownTraffic(() => now - 10_000, prefix));
      await h.settle(filter(), 1000);
      await h.settle(filter({ environment: 'staging' }), 100);
    });

    it('counts every request, the errors (5xx and 408) and the error rate', async () => {
      const { summary } = await backend.query(filter());
      expect(summary).toEqual({
        totalSpans: 1000,
        // rank 990 of 1000 is the last request of the (200 ms, 250 ms] bucket
        avgP99LatencyMs: 250,
        errorCount: 30,
        errorRatePercent: 3,
      });
    });

    it('ranks endpoints by request count with their share of the total', async () => {
      const result = await backend.query(filter());
      expect(result.topByRequestCount).toEqual([
        { method: 'POST', path: ORDERS, statusCode: 202, count: 480, sharePercent: 48 },
        { method: 'GET', path: STATUS, statusCode: 200, count: 290, sharePercent: 29 },
        { method: 'POST', path: INVOICES, statusCode: 200, count: 150, sharePercent: 15 },
        { method: 'POST', path: INVOICES, statusCode: 429, count: 40, sharePercent: 4 },
        { method: 'POST', path: ORDERS, statusCode: 500, count: 20, sharePercent: 2 },
        { method: 'GET', path: STATUS, statusCode: 408, count: 10, sharePercent: 1 },
        { method: 'POST', path: INVOICES, statusCode: 401, count: 10, sharePercent: 1 },
      ]);
    });

    it('ranks endpoints by average latency in milliseconds with two decimals', async () => {
      const result = await backend.query(filter());
      expect(
        result.topByLatency.map((r) => [r.method, r.path, r.statusCode, r.count, r.avgLatencyMs]),
      ).toEqual([
        ['GET', STATUS, 408, 10, 5000],
        ['POST', ORDERS, 500, 20, 250],
        ['POST', INVOICES, 200, 150, 100],
        ['GET', STATUS, 200, 290, 40],
        ['POST', ORDERS, 202, 480, 10],
        ['POST', INVOICES, 401, 10, 2],
        ['POST', INVOICES, 429, 40, 1],
      ]);
    });

    it('caps the top lists at the limit', async () => {
      const result = await backend.query(filter({ limit: 2 }));
      expect(result.topByRequestCount.map((r) => r.count)).toEqual([480, 290]);
      expect(result.topByLatency.map((r) => r.avgLatencyMs)).toEqual([5000, 250]);
    });

    it('filters by application', async () => {
      const { summary, topByRequestCount } = await backend.query(
        filter({ applications: [billing] }),
      );
      expect(summary).toEqual({
        totalSpans: 200,
        // rank 198 of 200 lies in the (80 ms, 100 ms] bucket: 80 + 20 * 148 / 150
        avgP99LatencyMs: 99.73,
        errorCount: 0,
        errorRatePercent: 0,
      });
      expect(topByRequestCount.map((r) => r.sharePercent)).toEqual([75, 20, 5]);
    });

    it('filters by method, status code and consumer', async () => {
      expect((await backend.query(filter({ method: 'GET' }))).summary.totalSpans).toBe(300);
      const failed = await backend.query(filter({ statusCode: 500 }));
      expect(failed.summary).toMatchObject({
        totalSpans: 20,
        errorCount: 20,
        errorRatePercent: 100,
      });
      expect((await backend.query(filter({ consumer: 'acme' }))).summary.totalSpans).toBe(250);
      expect((await backend.query(filter({ consumer: 'anonymous' }))).summary.totalSpans).toBe(310);
      expect((await backend.query(filter({ consumer: 'nobody' }))).summary).toEqual({
        totalSpans: 0,
        avgP99LatencyMs: null,
        errorCount: 0,
        errorRatePercent: null,
      });
    });

    it('filters by environment', async () => {
      const { summary, topByRequestCount } = await backend.query(
        filter({ environment: 'staging' }),
      );
      expect(summary).toEqual({
        totalSpans: 100,
        // rank 99 of 100 in the (400 ms, 500 ms] bucket: 400 + 100 * 99 / 100
        avgP99LatencyMs: 499,
        errorCount: 100,
        errorRatePercent: 100,
      });
      expect(topByRequestCount).toEqual([
        { method: 'POST', path: STAGING, statusCode: 503, count: 100, sharePercent: 100 },
      ]);
    });

    it('gives a per-minute series whose points add up to the total', async () => {
      const { timeseries, summary } = await backend.query(filter());
      expect(timeseries.stepSeconds).toBe(60);
      const requests = timeseries.points.reduce((n, p) => n + p.requests, 0);
      const errors = timeseries.points.reduce((n, p) => n + p.errors, 0);
      expect(requests).toBe(summary.totalSpans);
      expect(errors).toBe(summary.errorCount);
      for (const p of timeseries.points) expect(Number.isNaN(Date.parse(p.at))).toBe(false);
    });

    it('lists the values seen for the dropdowns', async () => {
      const options = await backend.options(filter({ applications: [shop] }));
      expect(options.applications).toEqual(expect.arrayContaining([billing, shop]));
      expect(options.environments).toEqual(['development', 'staging', 'production']);
      expect(options.methods).toEqual(['GET', 'POST']);
      expect(options.statusCodes).toEqual([200, 202, 408, 500]);
      expect(options.consumers).toEqual(['acme', 'anonymous', 'globex']);
      expect(options.routes).toEqual([STATUS, ORDERS]);
    });
  });
}
