// The dashboard as `npm start` serves it: the real runtime (gateway, engine,
// analytics), real webhook traffic, the real live event stream, in headless Chromium.
import { mkdir } from 'node:fs/promises';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { secret, trigger, workflow } from '../support/manifests.ts';
import { CHROMIUM, CHROMIUM_FLAGS, skipBrowserTests } from '../support/chromium.ts';

const skip = skipBrowserTests();

const PATH = '/webhook/default_production_orders/ingest';

describe.skipIf(skip)('dashboard over the real runtime', () => {
  let rt: TestRuntime;
  let base: string;
  /** The admin listener: the dashboard, its API and the live stream. */
  let admin: string;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    rt = await startRuntime();
    await rt.apply(
      'orders.yaml',
      [
        secret('keys', { acme: 'key-acme-1', globex: 'key-globex-1' }),
        workflow('orders'),
        trigger('ingest', {
          workflowRef: { name: 'orders' },
          pathSegment: 'ingest',
          auth: { method: 'apiKey', apiKey: { secretRef: { name: 'keys' } } },
        }),
      ],
      ['ingest'],
    );
    base = await rt.app.listen({ port: 0, host: '127.0.0.1' });
    admin = await rt.admin.listen({ port: 0, host: '127.0.0.1' });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: CHROMIUM_FLAGS,
      headless: true,
    });
    page = await browser.newPage({ viewport: { width: 1440, height: 1000 } });
  });
  afterAll(async () => {
    await browser?.close();
    await rt?.stop();
  });

  const call = (key: string) =>
    fetch(`${base}${PATH}`, {
      method: 'POST',
      headers: { 'x-api-key': key, 'content-type': 'application/json' },
      body: '{"a":1}',
    });

  it('a request and a refusal appear in the live stream as they happen, the key redacted', async () => {
    await page.goto(`${admin}/dashboard`);
    await page.fill('#live-path', PATH);
    await page.click('#live-connect');
    await expect.poll(() => page.textContent('#live-status')).toBe('Connected');
    expect((await call('key-acme-1')).status).toBe(202);
    expect((await call('wrong-key')).status).toBe(401);
    await expect.poll(() => page.locator('#live-log li[data-kind="response"]').count()).toBe(2);
    const text = await page.textContent('#live-log');
    expect(text).toContain('202');
    expect(text).toContain('401');
    expect(text).not.toContain('key-acme-1');
  });

  it('the cards count the traffic the gateway served', async () => {
    for (let i = 0; i < 5; i++) await call('key-globex-1');
    await page.goto(`${admin}/dashboard?window=5m`);
    await page.waitForSelector('body[data-state="ready"]');
    const summary = (await (await fetch(`${admin}/api/analytics/summary?window=5m`)).json()) as {
      summary: { totalSpans: number };
    };
    expect(summary.summary.totalSpans).toBe(7);
    await expect.poll(() => page.locator('#card-total-spans .value').textContent()).toBe('7');
    await mkdir('test-results', { recursive: true });
    await page.screenshot({ path: 'test-results/dashboard-runtime.png', fullPage: true });
  });
});
