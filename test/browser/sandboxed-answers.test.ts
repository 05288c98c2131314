// A tenant's HTML answer in headless Chromium, on the host name that also serves the
// admin listener: the browser holds a cookie for that host (cookies do not tell ports
// apart), and the tenant's page tries to read it and the origin's storage. Sandboxed
// (CSP sandbox on every answer of the webhook listener) its script does not run at all;
// allowed to run by its own policy, it runs in an opaque origin where neither can be
// read (test/gateway-security/sandboxed-answers.test.ts has the headers over HTTP).
import { chromium, type Browser, type BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { trigger, workflow } from '../support/manifests.ts';
import { CHROMIUM, CHROMIUM_FLAGS, skipBrowserTests } from '../support/chromium.ts';

const skip = skipBrowserTests();

/** What a hostile tenant page reports in its title: the cookie, its storage, its origin. */
const PAGE = `<!doctype html><title>not run</title><script>
const seen = {};
try { seen.cookie = document.cookie; } catch (e) { seen.cookie = 'refused: ' + e.name; }
try { localStorage.setItem('k', 'v'); seen.storage = 'writable'; } catch (e) { seen.storage = 'refused: ' + e.name; }
seen.origin = self.origin;
document.title = JSON.stringify(seen);
</script>`;

describe.skipIf(skip)("a tenant's HTML answer in Chromium", () => {
  let rt: TestRuntime;
  let base: string;
  let browser: Browser;
  let context: BrowserContext;

  beforeAll(async () => {
    rt = await startRuntime();
    await rt.apply(
      'pages.yaml',
      [
        workflow('page', {
          nodes: [{ id: 'page', type: 'transform', expression: JSON.stringify(PAGE) }],
        }),
        workflow('scripted', {
          nodes: [
            {
              id: 'answer',
              type: 'respond',
              expression: JSON.stringify(PAGE),
              // It asks for its origin back: the gateway keeps allow-scripts only.
              headers: { 'Content-Security-Policy': 'sandbox allow-scripts allow-same-origin' },
            },
          ],
        }),
        trigger('page', {
          workflowRef: { name: 'page' },
          methods: ['GET'],
          response: { mode: 'waitForCompletion', contentType: 'text/html' },
        }),
        trigger('scripted', {
          workflowRef: { name: 'scripted' },
          methods: ['GET'],
          response: { mode: 'waitForResponseNode', contentType: 'text/html' },
        }),
      ],
      ['page', 'scripted'],
    );
    base = await rt.app.listen({ port: 0, host: '127.0.0.1' });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_FLAGS });
    context = await browser.newContext();
    // What a dashboard that kept its admin token in a cookie left for this host.
    await context.addCookies([
      { name: 'hookgate_admin_token', value: 'admin-secret', domain: '127.0.0.1', path: '/' },
    ]);
  });
  afterAll(async () => {
    await browser?.close();
    await rt?.stop();
  });

  const titleOf = async (name: string): Promise<string> => {
    const page = await context.newPage();
    try {
      const res = await page.goto(`${base}/webhook/default_production_${name}/default`);
      expect(res?.status()).toBe(200);
      return await page.title();
    } finally {
      await page.close();
    }
  };

  it('a sandboxed page runs no script: the cookie is never read', async () => {
    expect(await titleOf('page')).toBe('not run');
  });

  it('a page its own policy lets run scripts runs them in an opaque origin: no cookie, no storage', async () => {
    const seen = JSON.parse(await titleOf('scripted')) as Record<string, string>;
    expect(seen).toEqual({
      cookie: 'refused: SecurityError',
      storage: 'refused: SecurityError',
      origin: 'null',
    });
  });
});
