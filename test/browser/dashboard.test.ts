// The dashboard in a real headless Chromium: served by Fastify on loopback with the
// memory backend and recorded traffic. Changes filters and checks the cards and
// tables show what the API answers; drives the live event stream panel against a
// small SSE endpoint speaking the gateway's format; saves a screenshot.
import { mkdir } from 'node:fs/promises';
import Fastify, { type FastifyInstance } from 'fastify';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AnalyticsResult } from '../../runtime/analytics/backend.ts';
import { MemoryAnalytics } from '../../runtime/analytics/memory.ts';
import { analyticsRoutes, problemErrorHandler } from '../../runtime/analytics/routes.ts';
import { dashboardRoutes } from '../../runtime/dashboard/routes.ts';
import { knownTraffic, ORDERS, randomTraffic } from '../analytics/traffic.ts';
import { CHROMIUM, CHROMIUM_FLAGS, skipBrowserTests } from '../support/chromium.ts';

const skip = skipBrowserTests();

const int = new Intl.NumberFormat('en-US');
const two = new Intl.NumberFormat('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 });

/** A stand-in for the gateway's live stream: same path and event format. */
function liveStream(app: FastifyInstance): {
  emit: (kind: string, data: object, id?: string) => void;
  /** Ends every open stream, as a server does at a restart. */
  end: () => void;
} {
  const clients = new Set<(chunk: string) => void>();
  const ends = new Set<() => void>();
  app.get('/webhook-events/*', (request, reply) => {
    const path = `/webhook/${(request.params as { '*': string })['*']}`;
    reply.raw.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
    });
    const write = (chunk: string) => {
      reply.raw.write(chunk);
      // As the admin listener does: the stream ends after its revoked event.
      if (chunk.startsWith('event: revoked\n')) reply.raw.end();
    };
    // A quick reconnection (100 ms), so that a page that reconnects is seen doing so.
    write(
      `retry: 100\nevent: connected\ndata: ${JSON.stringify({ path, at: new Date().toISOString() })}\n\n`,
    );
    clients.add(write);
    const end = () => reply.raw.end();
    ends.add(end);
    request.raw.on('close', () => {
      clients.delete(write);
      ends.delete(end);
    });
    reply.hijack();
  });
  return {
    emit: (kind, data, id) => {
      const frame = `${id !== undefined ? `id: ${id}\n` : ''}event: ${kind}\ndata: ${JSON.stringify(data)}\n\n`;
      for (const write of clients) write(frame);
    },
    end: () => {
      for (const end of [...ends]) end();
    },
  };
}

describe.skipIf(skip)('analytics dashboard in Chromium', () => {
  let app: FastifyInstance;
  let base: string;
  let browser: Browser;
  let page: Page;
  let emit: ReturnType<typeof liveStream>['emit'];
  let endStreams: () => void;

  beforeAll(async () => {
    const backend = new MemoryAnalytics();
    const now = Date.now();
    knownTraffic((i) => now - 10_000 - (i % 45) * 60_000).forEach((o) => backend.observe(o));
    randomTraffic(600, 9, (i) => now - 10_000 - (i % 50) * 60_000, 'reports').forEach((o) =>
      backend.observe({ ...o, environment: 'production' }),
    );
    app = Fastify();
    app.setErrorHandler(problemErrorHandler);
    await app.register(analyticsRoutes, { backend });
    await app.register(dashboardRoutes);
    ({ emit, end: endStreams } = liveStream(app));
    base = await app.listen({ host: '127.0.0.1', port: 0 });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: CHROMIUM_FLAGS,
      headless: true,
    });
    page = await browser.newPage({ viewport: { width: 1440, height: 1000 } });
    page.on('pageerror', (error) => {
      throw error;
    });
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  async function api(query: string): Promise<AnalyticsResult> {
    const res = await app.inject(`/api/analytics/summary?${query}`);
    expect(res.statusCode).toBe(200);
    return res.json<AnalyticsResult>();
  }

  /** Waits for the page to show what the API answers for the page's own filters. */
  async function expectPageMatchesApi(): Promise<AnalyticsResult> {
    await page.waitForSelector('body[data-state="ready"]');
    const query = new URL(page.url()).search.slice(1);
    const result = await api(query);
    const s = result.summary;
    const card = (id: string) => page.locator(`#${id} .value`);
    await expect.poll(() => card('card-total-spans').textContent()).toBe(int.format(s.totalSpans));
    expect(await card('card-p99').textContent()).toBe(
      s.avgP99LatencyMs === null ? '—' : `${two.format(s.avgP99LatencyMs)}ms`,
    );
    expect(await card('card-error-count').textContent()).toBe(int.format(s.errorCount));
    expect(await card('card-error-rate').textContent()).toBe(
      s.errorRatePercent === null ? '—' : `${two.format(s.errorRatePercent)}%`,
    );
    const rows = (id: string) =>
      page
        .locator(`#${id} tbody tr`)
        .evaluateAll((trs) =>
          trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent?.trim())),
        );
    expect(await rows('top-by-count')).toEqual(
      result.topByRequestCount.length === 0
        ? [['No requests']]
        : result.topByRequestCount.map((r) => [
            r.method,
            r.path,
            String(r.statusCode),
            `${int.format(r.count)}${two.format(r.sharePercent)}%`,
          ]),
    );
    expect(await rows('top-by-latency')).toEqual(
      result.topByLatency.length === 0
        ? [['No requests']]
        : result.topByLatency.map((r) => [
            r.method,
            r.path,
            String(r.statusCode),
            int.format(r.count),
            `${two.format(r.avgLatencyMs)} ms`,
          ]),
    );
    return result;
  }

  /** Select an option and wait for the reload it starts. */
  async function choose(id: string, value: string): Promise<void> {
    await page.selectOption(`#${id}`, value);
    await page.waitForSelector('body[data-state="ready"]');
  }

  it('shows the cards, top lists and chart the API answers, and follows the filters', async () => {
    await page.goto(`${base}/dashboard`);
    const all = await expectPageMatchesApi();
    expect(all.summary.totalSpans).toBe(1700);
    expect(await page.locator('#chart svg rect.bar-ok').count()).toBeGreaterThan(10);
    expect(await page.locator('#chart svg rect.bar-err').count()).toBeGreaterThan(0);

    await choose('environment', 'production');
    expect(page.url()).toContain('environment=production');
    expect((await expectPageMatchesApi()).summary.totalSpans).toBe(1600);

    await page.click('#applications summary');
    await page.check('#applications input[value="shop"]');
    await page.waitForSelector('body[data-state="ready"]');
    await page.check('#applications input[value="billing"]');
    await page.waitForSelector('body[data-state="ready"]');
    await page.click('h1');
    expect(new URL(page.url()).searchParams.getAll('application')).toEqual(['billing', 'shop']);
    const known = await expectPageMatchesApi();
    expect(known.summary).toEqual({
      totalSpans: 1000,
      avgP99LatencyMs: 250,
      errorCount: 30,
      errorRatePercent: 3,
    });
    expect(await page.locator('#card-p99 .value').textContent()).toBe('250.00ms');
    expect(await page.locator('#card-error-rate .value').textContent()).toBe('3.00%');
    expect(await page.locator('#top-by-count tbody tr').first().textContent()).toContain(ORDERS);

    await choose('method', 'GET');
    expect((await expectPageMatchesApi()).summary.totalSpans).toBe(300);
    await choose('status', '408');
    expect((await expectPageMatchesApi()).summary).toMatchObject({
      totalSpans: 10,
      errorCount: 10,
    });
    await choose('status', '');
    await choose('method', '');
    await choose('consumer', 'acme');
    expect((await expectPageMatchesApi()).summary.totalSpans).toBe(250);
    await choose('consumer', '');
    await choose('window', '5m');
    await expectPageMatchesApi();
    await choose('window', '1h');
    expect((await expectPageMatchesApi()).summary.totalSpans).toBe(1000);
  });

  it('keeps its filters in the URL and shows the problem for a bad one', async () => {
    await page.goto(`${base}/dashboard?window=48h`);
    await page.waitForSelector('body[data-state="error"]');
    expect(await page.locator('#problem').textContent()).toContain('longer than 24h');
    await page.goto(`${base}/dashboard?environment=staging&window=3h`);
    expect((await expectPageMatchesApi()).summary.totalSpans).toBe(100);
    expect(await page.inputValue('#environment')).toBe('staging');
    expect(await page.inputValue('#window')).toBe('3h');
  });

  it('streams live events: connect, see requests and responses, expand, clear, disconnect', async () => {
    await page.goto(`${base}/dashboard?environment=production&window=1h`);
    await page.waitForSelector('body[data-state="ready"]');
    expect(await page.textContent('#live-status')).toBe('Disconnected');
    await page.fill('#live-path', ORDERS);
    await page.click('#live-connect');
    await expect.poll(() => page.textContent('#live-status')).toBe('Connected');
    await expect.poll(() => page.textContent('#live-count')).toBe('1');
    expect(await page.textContent('#live-log li[data-kind="connected"]')).toContain(ORDERS);
    await page.check('#live-sound');

    const at = new Date().toISOString();
    emit('request', {
      requestId: 'req-1',
      correlationId: 'corr-1',
      at,
      method: 'POST',
      path: ORDERS,
      consumer: 'acme',
      headers: { 'content-type': 'application/json', 'x-api-key': '[redacted]' },
      bodySummary: '{"orderId":42}',
    });
    emit('response', {
      requestId: 'req-1',
      correlationId: 'corr-1',
      at,
      statusCode: 202,
      latencyMs: 12.5,
      executionId: 'exec-1',
      consumer: 'acme',
      problem: null,
    });
    await expect.poll(() => page.textContent('#live-count')).toBe('3');
    const request = page.locator('#live-log li[data-kind="request"]');
    expect(await request.locator('summary').textContent()).toContain(`POST ${ORDERS} · acme`);
    const response = page.locator('#live-log li[data-kind="response"]');
    expect(await response.locator('summary').textContent()).toContain(
      '202 · 12.50 ms · execution exec-1',
    );
    await response.locator('summary').click();
    expect(await response.locator('pre').isVisible()).toBe(true);
    expect(await response.locator('pre').textContent()).toContain('"correlationId": "corr-1"');
    await request.locator('summary').click();
    expect(await request.locator('pre').textContent()).toContain('[redacted]');

    await mkdir('test-results', { recursive: true });
    await page.screenshot({ path: 'test-results/dashboard.png', fullPage: true });

    await page.click('#live-clear');
    expect(await page.textContent('#live-count')).toBe('0');
    expect(await page.locator('#live-log li').count()).toBe(0);
    await page.click('#live-disconnect');
    expect(await page.textContent('#live-status')).toBe('Disconnected');
    expect(await page.textContent('#live-duration')).toBe('00:00');
  });

  it('reconnects a stream that ended after its retry, with Last-Event-ID, as an EventSource does', async () => {
    await page.goto(`${base}/dashboard?environment=production&window=1h`);
    await page.waitForSelector('body[data-state="ready"]');
    await page.fill('#live-path', ORDERS);
    await page.click('#live-connect');
    await expect.poll(() => page.textContent('#live-status')).toBe('Connected');
    await expect.poll(() => page.textContent('#live-count')).toBe('1');
    emit('request', { at: new Date().toISOString(), method: 'POST', path: ORDERS }, '41');
    await expect.poll(() => page.textContent('#live-count')).toBe('2');
    const reconnect = page.waitForRequest('**/webhook-events/**');
    endStreams();
    const request = await reconnect;
    expect(await request.headerValue('last-event-id')).toBe('41');
    // Connected again: the stand-in's `connected` event of the new stream is counted.
    await expect.poll(() => page.textContent('#live-count')).toBe('3');
    expect(await page.textContent('#live-status')).toBe('Connected');
    await page.click('#live-disconnect');
  });

  it('stops, without reconnecting, and says why when the stream is revoked', async () => {
    await page.goto(`${base}/dashboard?environment=production&window=1h`);
    await page.waitForSelector('body[data-state="ready"]');
    await page.fill('#live-path', ORDERS);
    await page.click('#live-connect');
    await expect.poll(() => page.textContent('#live-status')).toBe('Connected');
    // What the admin listener sends when the token or the RoleBinding was withdrawn.
    emit('revoked', {
      type: 'https://hookgate.dev/problems/admin-forbidden',
      title: 'Not allowed',
      status: 403,
      detail: 'alice may no longer get webhooktriggers.hookgate.dev orders in namespace shop',
      code: 'HG_ERR_ADMIN_FORBIDDEN',
    });
    await expect.poll(() => page.textContent('#live-status')).toBe('Disconnected');
    expect(await page.textContent('#live-endpoint')).toContain(
      'access ended: alice may no longer get webhooktriggers.hookgate.dev orders in namespace shop',
    );
    // No reconnection (it would come after 100 ms): still disconnected a while later.
    const connects = page.waitForRequest('**/webhook-events/**', { timeout: 1_000 }).then(
      () => 'reconnected',
      () => 'none',
    );
    expect(await connects).toBe('none');
    expect(await page.textContent('#live-status')).toBe('Disconnected');
  });
});
