// The dashboard with an admin token, in headless Chromium over the real runtime: the
// token stays in the admin origin's sessionStorage and goes as `Authorization: Bearer`,
// on the live streams too (read with fetch: an EventSource sends no headers). No cookie
// holds it: cookies do not tell ports apart, so one would reach the webhook listener of
// the same host, and a tenant's page there (docs/security.md, "The admin listener").
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminAccess } from '../../runtime/admin/access.ts';
import { StaticTokenAuthenticator } from '../../runtime/admin/static-token.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { trigger, workflow } from '../support/manifests.ts';
import { CHROMIUM, CHROMIUM_FLAGS, skipBrowserTests } from '../support/chromium.ts';

const skip = skipBrowserTests();
const TOKEN = 'dashboard-admin-token-0123456789';
const PATH = '/webhook/default_production_slow/default';

describe.skipIf(skip)('the dashboard keeps its admin token out of cookies', () => {
  let rt: TestRuntime;
  let base: string;
  let admin: string;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;

  beforeAll(async () => {
    rt = await startRuntime({
      adminAccess: new AdminAccess(new StaticTokenAuthenticator(TOKEN)),
    });
    await rt.apply(
      'slow.yaml',
      [
        workflow('slow', {
          nodes: [
            { id: 'wait', type: 'delay', duration: '1500ms' },
            { id: 'done', type: 'transform', expression: '{ "done": true }' },
          ],
        }),
        trigger('slow', { workflowRef: { name: 'slow' }, response: { mode: 'immediateAck' } }),
      ],
      ['slow'],
    );
    base = await rt.app.listen({ port: 0, host: '127.0.0.1' });
    admin = await rt.admin.listen({ port: 0, host: '127.0.0.1' });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_FLAGS });
    context = await browser.newContext();
    // What a dashboard before 2026-11-28 left in a browser: removed by the page.
    await context.addCookies([
      { name: 'hookgate_admin_token', value: 'stale', domain: '127.0.0.1', path: '/' },
    ]);
    page = await context.newPage();
    page.on('pageerror', (error) => {
      throw error;
    });
  });
  afterAll(async () => {
    await browser?.close();
    await rt?.stop();
  });

  /** The headers each request to `pattern` was sent with, as Chromium sent them. */
  const sentHeaders = (pattern: RegExp) => {
    const seen: Record<string, string>[] = [];
    page.on('request', (request) => {
      if (pattern.test(request.url())) void request.allHeaders().then((h) => seen.push(h));
    });
    return seen;
  };

  /** Opens the dashboard, types the token and connects its live stream to PATH. */
  async function connectLive(): Promise<void> {
    await page.goto(`${admin}/dashboard`);
    await page.fill('#admin-token', TOKEN);
    await page.dispatchEvent('#admin-token', 'change');
    await page.fill('#live-path', PATH);
    await page.click('#live-connect');
    await expect.poll(() => page.textContent('#live-status')).toBe('Connected');
  }

  it('the live stream sends the token as a header; no cookie holds it, an old one is removed', async () => {
    const streams = sentHeaders(/\/webhook-events\//);
    await connectLive();
    const res = await fetch(`${base}${PATH}`, { method: 'POST' });
    expect(res.status).toBe(202);
    await expect.poll(() => page.locator('#live-log li[data-kind="response"]').count()).toBe(1);
    expect(await page.textContent('#live-log')).toContain('202');
    expect(streams).toHaveLength(1);
    expect(streams[0]?.authorization).toBe(`Bearer ${TOKEN}`);
    expect(streams[0]?.cookie).toBeUndefined();
    expect(await context.cookies()).toEqual([]);
    expect(await page.evaluate(() => document.cookie)).toBe('');
    await page.click('#live-disconnect');
    expect(await page.textContent('#live-status')).toBe('Disconnected');
  });

  it("Flow Management follows a run's events with the token as a header, to its end", async () => {
    const streams = sentHeaders(/\/api\/executions\/[^/]+\/events/);
    await page.goto(`${admin}/dashboard/flows?trigger=default/slow`);
    await page.waitForSelector('#conditions li');
    await page.click('#send-test');
    await page.waitForSelector('#test-response:not([hidden])');
    expect(await page.textContent('#response-status')).toBe('202');
    await page.locator('#executions tbody tr').first().getByRole('button').click();
    await expect.poll(() => page.textContent('#run-live')).toBe('Live');
    await expect
      .poll(() => page.textContent('#run-summary'), { timeout: 15_000 })
      .toContain('succeeded');
    await expect.poll(() => page.textContent('#run-live')).toBe('Finished');
    expect(streams.length).toBeGreaterThanOrEqual(1);
    for (const headers of streams) {
      expect(headers.authorization).toBe(`Bearer ${TOKEN}`);
      expect(headers.cookie).toBeUndefined();
    }
    expect(await context.cookies()).toEqual([]);
  }, 30_000);

  it('a stream open under a token that is then cleared is opened again without it: refused, closed', async () => {
    const streams = sentHeaders(/\/webhook-events\//);
    await connectLive();
    // The path field edited since: the stream opened again is the one that was open.
    await page.fill('#live-path', '/webhook/elsewhere/default');
    await page.fill('#admin-token', '');
    await page.dispatchEvent('#admin-token', 'change');
    await expect.poll(() => page.textContent('#live-status')).toBe('Disconnected');
    await expect.poll(() => streams.length).toBe(2);
    expect(streams[1]?.authorization).toBeUndefined();
    expect(await page.textContent('#live-endpoint')).toContain(
      '/webhook-events/default_production_slow/default',
    );
    const responses = await page.locator('#live-log li[data-kind="response"]').count();
    expect((await fetch(`${base}${PATH}`, { method: 'POST' })).status).toBe(202);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await page.locator('#live-log li[data-kind="response"]').count()).toBe(responses);
  });

  it("Flow Management takes the triggers and a trigger's details off when the token is cleared", async () => {
    await page.goto(`${admin}/dashboard/flows`);
    await page.fill('#admin-token', TOKEN);
    await page.dispatchEvent('#admin-token', 'change');
    await expect.poll(() => page.textContent('#triggers tbody')).toContain('default/slow');
    await page.fill('#admin-token', '');
    await page.dispatchEvent('#admin-token', 'change');
    await expect.poll(() => page.textContent('#problem')).toContain('401');
    expect(await page.textContent('#triggers tbody')).toBe('');

    await page.fill('#admin-token', TOKEN);
    await page.dispatchEvent('#admin-token', 'change');
    await page.goto(`${admin}/dashboard/flows?trigger=default/slow`);
    await page.waitForSelector('#conditions li');
    expect(await page.locator('#executions tbody tr').count()).toBeGreaterThan(0);
    await page.fill('#admin-token', '');
    await page.dispatchEvent('#admin-token', 'change');
    await expect.poll(() => page.textContent('#problem')).toContain('401');
    await expectNoTriggerDetails();
  });

  it("Flow Management shows none of the last trigger's details under one that fails to load", async () => {
    await page.fill('#admin-token', TOKEN);
    await page.dispatchEvent('#admin-token', 'change');
    await page.goto(`${admin}/dashboard/flows?trigger=default/slow`);
    await page.waitForSelector('#conditions li');
    // Back and forward within the page: the trigger is read again, without a reload.
    await page.evaluate(() => {
      history.pushState(null, '', '/dashboard/flows?trigger=default/deleted');
      dispatchEvent(new PopStateEvent('popstate'));
    });
    await expect.poll(() => page.textContent('#problem')).toContain('does not exist');
    expect(await page.textContent('#trigger-title')).toBe('default/deleted');
    await expectNoTriggerDetails();
  });

  async function expectNoTriggerDetails(): Promise<void> {
    expect(await page.textContent('#trigger-summary')).toBe('');
    expect(await page.locator('#conditions li').count()).toBe(0);
    expect(await page.textContent('#trigger-url')).not.toContain(PATH);
    expect(await page.locator('#executions tbody tr').count()).toBe(0);
    expect(await page.textContent('#cred-status')).toBe('');
    expect(await page.locator('#test-method option').count()).toBe(0);
  }

  it('without the token a stream is refused (401) and closed, not retried for ever', async () => {
    await page.goto(`${admin}/dashboard`);
    await page.fill('#admin-token', '');
    await page.dispatchEvent('#admin-token', 'change');
    await page.fill('#live-path', PATH);
    await page.click('#live-connect');
    await expect.poll(() => page.textContent('#live-status')).toBe('Disconnected');
    expect(await page.textContent('#live-endpoint')).toContain('the stream closed');
  });
});
