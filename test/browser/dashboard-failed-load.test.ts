// The analytics dashboard when a load fails, in headless Chromium: figures the page can
// no longer vouch for are not left on screen. A reader whose token was cleared (401) or
// whose access was withdrawn (403) no longer sees the figures, names and consumers of
// the last answer; a filter change whose load fails does not leave the previous
// filters' figures under the new selection; a refresh of the same filters that fails
// (Prometheus blinking) keeps them, with when they were read. A resize redraws the chart
// from what it has.
import Fastify, { type FastifyInstance } from 'fastify';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { analyticsRoutes, problemErrorHandler } from '../../runtime/analytics/routes.ts';
import { dashboardRoutes } from '../../runtime/dashboard/routes.ts';
import { HttpProblem } from '../../runtime/errors.ts';
import { analyticsOfKnownTraffic, ORDERS } from '../analytics/traffic.ts';
import { CHROMIUM, CHROMIUM_FLAGS, skipBrowserTests } from '../support/chromium.ts';

const skip = skipBrowserTests();
const TOKEN = 'analytics-reader-token';
const WITHDRAWN = 'withdrawn-reader-token';

describe.skipIf(skip)('the analytics dashboard after a failed load, and resized', () => {
  let app: FastifyInstance;
  let base: string;
  let browser: Browser;
  let page: Page;
  /** While true, the analytics API answers 503 analytics-unavailable. */
  let failing = false;

  beforeAll(async () => {
    const backend = analyticsOfKnownTraffic();
    app = Fastify();
    app.setErrorHandler(problemErrorHandler);
    // As the admin listener: a bearer token, checked before the analytics answer.
    app.addHook('onRequest', (request, _reply, done) => {
      if (!request.url.startsWith('/api/')) return done();
      const auth = request.headers.authorization;
      if (auth === `Bearer ${WITHDRAWN}`) {
        return done(new HttpProblem('HG_ERR_ADMIN_FORBIDDEN', 'access withdrawn'));
      }
      if (auth !== `Bearer ${TOKEN}`) {
        return done(new HttpProblem('HG_ERR_ADMIN_UNAUTHENTICATED', 'a bearer token is needed'));
      }
      if (failing) {
        return done(new HttpProblem('HG_ERR_ANALYTICS_UNAVAILABLE', 'Prometheus answered 502'));
      }
      done();
    });
    await app.register(analyticsRoutes, { backend });
    await app.register(dashboardRoutes);
    base = await app.listen({ host: '127.0.0.1', port: 0 });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_FLAGS });
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  beforeEach(async () => {
    failing = false;
    page = await browser.newPage();
    page.on('pageerror', (error) => {
      throw error;
    });
    await page.goto(`${base}/dashboard?window=1h`);
    await typeToken(TOKEN);
    await page.waitForSelector('body[data-state="ready"]');
    await expect.poll(() => value('card-total-spans')).toBe('1,100');
  });

  const value = (card: string) => page.locator(`#${card} .value`).textContent();
  const cells = (table: string) => page.locator(`#${table} tbody`).textContent();
  const options = (select: string) =>
    page.locator(`#${select} option`).evaluateAll((os) => os.map((o) => o.textContent));
  const applications = () => page.locator('#applications .multiselect-menu').textContent();

  async function typeToken(token: string): Promise<void> {
    await page.fill('#admin-token', token);
    await page.dispatchEvent('#admin-token', 'change');
  }

  async function expectNoFigures(): Promise<void> {
    for (const card of ['card-total-spans', 'card-p99', 'card-error-count', 'card-error-rate']) {
      expect(await value(card)).toBe('—');
    }
    expect(await cells('top-by-count')).not.toContain(ORDERS);
    expect(await cells('top-by-latency')).not.toContain(ORDERS);
    expect(await page.locator('#chart rect').count()).toBe(0);
  }

  it('a cleared token (401) takes the figures, applications and consumers off the page', async () => {
    expect(await applications()).toContain('shop');
    expect(await options('consumer')).toContain('acme');
    await typeToken('');
    await page.waitForSelector('body[data-state="error"]');
    expect(await page.textContent('#problem')).toContain('401');
    await expectNoFigures();
    expect(await applications()).not.toContain('shop');
    expect(await options('consumer')).toEqual(['All consumers']);
    expect(await page.locator('#live-routes option').count()).toBe(0);
    await page.close();
  });

  it('withdrawn access (403) takes them off too', async () => {
    await typeToken(WITHDRAWN);
    await page.waitForSelector('body[data-state="error"]');
    expect(await page.textContent('#problem')).toContain('403');
    await expectNoFigures();
    expect(await applications()).not.toContain('shop');
    await page.close();
  });

  it("a filter change that fails does not show the previous filters' figures", async () => {
    failing = true;
    await page.selectOption('#window', '5m');
    await page.waitForSelector('body[data-state="error"]');
    expect(await page.textContent('#problem')).toContain('Prometheus answered 502');
    await expectNoFigures();
    expect(await page.inputValue('#window')).toBe('5m');
    await page.close();
  });

  it('a resized window redraws the chart without asking the API again', async () => {
    const asked: string[] = [];
    page.on('request', (request) => {
      if (request.url().includes('/api/analytics/')) asked.push(request.url());
    });
    const bars = await page.locator('#chart rect.bar-ok').count();
    const width = await page.locator('#chart svg').getAttribute('viewBox');
    await page.setViewportSize({ width: 900, height: 700 });
    await expect.poll(() => page.locator('#chart svg').getAttribute('viewBox')).not.toBe(width);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(asked).toEqual([]);
    expect(await page.locator('#chart rect.bar-ok').count()).toBe(bars);
    await page.close();
  });

  it('a refresh of the same filters that fails keeps the figures it had', async () => {
    const updated = await page.textContent('#updated');
    failing = true;
    await page.click('#refresh');
    await page.waitForSelector('body[data-state="error"]');
    expect(await value('card-total-spans')).toBe('1,100');
    expect(await cells('top-by-count')).toContain(ORDERS);
    expect(await page.textContent('#updated')).toBe(updated);
    failing = false;
    await page.click('#refresh');
    await page.waitForSelector('body[data-state="ready"]');
    expect(await page.textContent('#problem')).toBe('');
    await page.close();
  });
});
