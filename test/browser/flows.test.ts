// Flow Management in headless Chromium over the real runtime (`npm start`'s): the
// trigger list with URLs to copy, a trigger's page with Test and Deploy (Send Test
// Request, its checks and refusals), recent executions and their per-run logs
// followed live, on a desktop and a phone-width screen. Screenshots are kept in
// test-results/.
import { mkdir } from 'node:fs/promises';
import {
  chromium,
  type Browser,
  type BrowserContext,
  type Page,
  type Request,
  type Route,
} from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DirectorySource } from '../../operator/sources/directory.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { secret, trigger, workflow } from '../support/manifests.ts';
import { CHROMIUM, CHROMIUM_FLAGS, skipBrowserTests } from '../support/chromium.ts';

const skip = skipBrowserTests();

const ORDER_FIELDS = [
  { name: 'orderId', type: 'string', required: true, value: 'A-1' },
  { name: 'total', type: 'number', required: true, value: 12.5 },
];

const manifests = [
  secret('keys', { acme: 'key-acme-1' }),
  workflow('orders', {
    nodes: [
      {
        id: 'shape',
        type: 'transform',
        expression: '{ "order": body.orderId, "total": body.total }',
      },
    ],
  }),
  workflow('slow', {
    nodes: [
      // Long enough to be still running when a loaded machine's browser opens it.
      { id: 'wait', type: 'delay', duration: '4000ms' },
      { id: 'done', type: 'transform', expression: '{ "done": true }' },
    ],
  }),
  trigger('ingest', {
    workflowRef: { name: 'orders' },
    pathSegment: 'ingest',
    auth: { method: 'apiKey', apiKey: { secretRef: { name: 'keys' } } },
    testCredentials: { type: 'apiKey', secretRef: { name: 'keys', key: 'acme' } },
    schema: { mode: 'manual', input: { fields: ORDER_FIELDS } },
    response: { mode: 'waitForCompletion' },
  }),
  workflow('doomed', {
    nodes: [{ id: 'boom', type: 'fail', expression: '"always fails"' }],
    retry: { attempts: 1, on: ['fail'] },
  }),
  trigger('doomed', {
    workflowRef: { name: 'doomed' },
    pathSegment: 'doomed',
    response: { mode: 'immediateAck' },
  }),
  workflow('echo', {
    nodes: [{ id: 'echo', type: 'transform', expression: '{ "received": $count($keys(body)) }' }],
  }),
  trigger('learner', {
    workflowRef: { name: 'echo' },
    pathSegment: 'learner',
    schema: { mode: 'automatic', input: {}, output: {}, learning: { enabled: true } },
    response: { mode: 'waitForCompletion' },
  }),
  trigger('locked', {
    workflowRef: { name: 'orders' },
    pathSegment: 'locked',
    auth: { method: 'apiKey', apiKey: { secretRef: { name: 'keys' } } },
  }),
  trigger('secure', {
    workflowRef: { name: 'slow' },
    pathSegment: 'secure',
    requireHttps: true,
    response: { mode: 'immediateAck' },
  }),
];

describe.skipIf(skip)('Flow Management in Chromium', () => {
  let rt: TestRuntime;
  let admin: string;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;

  beforeAll(async () => {
    rt = await startRuntime();
    await rt.apply('flows.yaml', manifests, ['ingest', 'secure', 'doomed', 'learner']);
    admin = await rt.admin.listen({ port: 0, host: '127.0.0.1' });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_FLAGS });
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: admin });
    page = await context.newPage();
    await mkdir('test-results', { recursive: true });
  });
  afterAll(async () => {
    await browser?.close();
    await rt?.stop();
  });

  const open = async (name: string) => {
    await page.goto(`${admin}/dashboard/flows?trigger=default/${name}`);
    await expect.poll(() => page.textContent('#trigger-title')).toBe(`default/${name}`);
    await page.waitForSelector('#conditions li');
  };

  it('lists every trigger with its state, URL (copied by its button), methods, auth and mode', async () => {
    await page.goto(`${admin}/dashboard/flows`);
    await expect.poll(() => page.locator('#triggers tbody tr').count()).toBe(5);
    const row = page.locator('#triggers tbody tr', { hasText: 'default/ingest' });
    const url = (await row.locator('td.url code').textContent()) ?? '';
    expect(url).toMatch(/^http:\/\/localhost\/webhook\/.+\/ingest$/);
    expect(await row.textContent()).toContain('apiKey');
    expect(await row.textContent()).toContain('waitForCompletion');
    expect(await row.locator('.badge').textContent()).toBe('Ready');
    await row.getByRole('button', { name: /Copy the URL/ }).click();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(url);
    await page.screenshot({ path: 'test-results/flows-list.png', fullPage: true });
  });

  it('shows the refused manifests above the list, each at its file and line, and none once fixed', async () => {
    await page.goto(`${admin}/dashboard/flows`);
    await page.waitForSelector('#triggers tbody tr');
    expect(await page.isHidden('#manifest-problems')).toBe(true);
    await rt.files.writeText(
      'broken.yaml',
      'apiVersion: hookgate.dev/v1alpha1\nkind: Workflow\nmetadata:\n  name: broken\nspec:\n  nodes: oops\n',
    );
    await (rt.source as DirectorySource).reload();
    await page.goto(`${admin}/dashboard/flows`);
    const item = page.locator('#manifest-problem-list li', { hasText: 'spec.nodes' });
    await expect
      .poll(() => item.textContent())
      .toMatch(/^broken\.yaml:6:3 Workflow default\/broken: spec\.nodes: .*must be of type array/);
    expect(await page.isVisible('#manifest-problems')).toBe(true);
    await rt.files.remove('broken.yaml');
    await (rt.source as DirectorySource).reload();
    await page.goto(`${admin}/dashboard/flows`);
    await page.waitForSelector('#triggers tbody tr');
    await expect.poll(() => page.isHidden('#manifest-problems')).toBe(true);
  });

  it('the manifest panel: quiet for a reader who may not read them, says a failure otherwise', async () => {
    for (const [status, shown] of [
      [403, false],
      [500, true],
    ] as const) {
      await page.route('**/api/manifests/errors', (route) =>
        route.fulfill({
          status,
          contentType: 'application/problem+json',
          body: JSON.stringify({ title: 'no', status, detail: `answered ${status}` }),
        }),
      );
      await page.goto(`${admin}/dashboard/flows`);
      await page.waitForSelector('#triggers tbody tr');
      await expect.poll(() => page.isVisible('#manifest-problems')).toBe(shown);
      if (shown)
        expect(await page.textContent('#manifest-problem-list')).toContain(
          'Could not read the manifest problems',
        );
      await page.unroute('**/api/manifests/errors');
    }
    expect(await page.isVisible('#problem')).toBe(false);
  });

  it("a trigger's answer that comes after the next trigger's does not replace it", async () => {
    await page.goto(`${admin}/dashboard/flows`);
    await page.waitForSelector('#triggers tbody tr');
    // The first trigger's read is slow; the reader goes on to another one meanwhile.
    let slowAnswered = false;
    await page.route('**/api/triggers/default/ingest', async (route) => {
      await new Promise((resolve) => setTimeout(resolve, 1000));
      await route.continue();
      slowAnswered = true;
    });
    await page.getByRole('link', { name: 'default/ingest' }).click();
    await page.evaluate(() => {
      history.pushState(null, '', '/dashboard/flows?trigger=default/doomed');
      dispatchEvent(new PopStateEvent('popstate'));
    });
    await expect.poll(() => page.textContent('#trigger-summary')).toContain('immediateAck');
    await expect.poll(() => slowAnswered).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await page.textContent('#trigger-title')).toBe('default/doomed');
    expect(await page.textContent('#trigger-summary')).toContain('immediateAck');
    expect(await page.textContent('#trigger-url')).toContain('/doomed');
    expect(await page.textContent('#cred-status')).toContain('No authentication');
    await page.unroute('**/api/triggers/default/ingest');
  });

  it('opens a trigger from the list with the keyboard alone', async () => {
    await page.goto(`${admin}/dashboard/flows`);
    await page.waitForSelector('#triggers tbody tr');
    const link = page.getByRole('link', { name: 'default/ingest' });
    await link.focus();
    await page.keyboard.press('Enter');
    await expect.poll(() => page.textContent('#trigger-title')).toBe('default/ingest');
    expect(page.url()).toContain('trigger=default%2Fingest');
    // Every form control has an accessible name.
    const unnamed = await page.evaluate(() =>
      [...document.querySelectorAll('input, select, textarea, button')]
        .filter((e) => !(e as HTMLElement).hidden && (e as HTMLElement).offsetParent !== null)
        .filter((e) => {
          const labelled = (e as HTMLInputElement).labels?.length ?? 0;
          return !labelled && !e.getAttribute('aria-label') && !e.textContent?.trim();
        })
        .map((e) => e.outerHTML),
    );
    expect(unnamed).toEqual([]);
  });

  it('Test and Deploy: the body starts from the fields’ values, is checked, is sent; the response shows below', async () => {
    await open('ingest');
    const body = JSON.parse(await page.inputValue('#test-body')) as unknown;
    expect(body).toEqual({ orderId: 'A-1', total: 12.5 });
    expect(await page.textContent('#body-check')).toContain('matches the input schema');
    expect(await page.textContent('#cred-status')).toContain('saved');
    // The saved credentials: hidden, then shown (where they come from, never the value).
    expect(await page.isHidden('#cred-detail')).toBe(true);
    await page.click('#cred-toggle');
    expect(await page.textContent('#cred-detail')).toContain('Secret keys, key acme');
    expect(await page.textContent('#cred-detail')).not.toContain('key-acme-1');
    await page.click('#send-test');
    await page.waitForSelector('#test-response:not([hidden])');
    expect(await page.textContent('#response-status')).toBe('200');
    expect(await page.textContent('#response-body')).toContain('"order": "A-1"');
    expect(await page.textContent('#response-time')).toMatch(/in \d+(\.\d+)? ms/);
    expect(await page.textContent('#response-headers')).toContain('content-type');
    // The execution appears in the list; its log shows the node with its output.
    await expect.poll(() => page.locator('#executions tbody tr').count()).toBeGreaterThan(0);
    await page.locator('#executions tbody tr').first().getByRole('button').click();
    await page.waitForSelector('#run-log li');
    expect(await page.textContent('#run-log')).toContain('shape');
    expect(await page.textContent('#run-log')).toContain('"order":"A-1"');
    await page.screenshot({ path: 'test-results/flows-trigger.png', fullPage: true });
  });

  it('an invalid JSON body or a missing required field is said, and sending waits for a fix', async () => {
    await open('ingest');
    await page.fill('#test-body', '{"orderId": ');
    expect(await page.textContent('#body-check')).toContain('Not valid JSON');
    expect(await page.isDisabled('#send-test')).toBe(true);
    await page.fill('#test-body', '{"total": "ten"}');
    const check = await page.textContent('#body-check');
    expect(check).toContain('orderId is required');
    expect(check).toContain('total must be a number');
    expect(await page.isDisabled('#send-test')).toBe(true);
    await page.fill('#test-body', '{"orderId": "B-2", "total": 3}');
    expect(await page.isDisabled('#send-test')).toBe(false);
  });

  it('without saved credentials, Send Test Request stays disabled and says why', async () => {
    await open('locked');
    expect(await page.textContent('#cred-status')).toContain('No test credentials saved');
    expect(await page.isDisabled('#send-test')).toBe(true);
  });

  it('reaches an endpoint that requires HTTPS, and follows the slow run live to its end', async () => {
    await open('secure');
    await page.click('#send-test');
    await page.waitForSelector('#test-response:not([hidden])');
    expect(await page.textContent('#response-status')).toBe('202');
    await expect.poll(() => page.locator('#executions tbody tr').count()).toBe(1);
    await page.locator('#executions tbody tr').first().getByRole('button').click();
    await page.waitForSelector('#run-live:not([hidden])');
    await expect
      .poll(() => page.textContent('#run-summary'), { timeout: 15_000 })
      .toContain('succeeded');
    expect(await page.textContent('#run-log')).toContain('done');
    expect(await page.textContent('#run-live')).toBe('Finished');
  }, 60_000);

  it('stops following a run, and says why, when its stream is revoked', async () => {
    // The admin listener's last event when the token or the user's access was withdrawn
    // (test/gateway-security/admin-stream-revocation.test.ts has the server side).
    const detail = 'ops may no longer get webhooktriggers.hookgate.dev secure in namespace default';
    await page.route('**/api/executions/*/events', (route) =>
      route.fulfill({
        status: 200,
        headers: { 'content-type': 'text/event-stream' },
        body: `event: revoked\ndata: ${JSON.stringify({ status: 403, detail })}\n\n`,
      }),
    );
    try {
      await open('secure');
      await page.click('#send-test');
      await page.waitForSelector('#test-response:not([hidden])');
      // The run just started, not the one of the test before (finished): newest first.
      await expect.poll(() => page.locator('#executions tbody tr').count()).toBe(2);
      await page.locator('#executions tbody tr').first().getByRole('button').click();
      await expect.poll(() => page.textContent('#run-live')).toBe('Stopped');
      expect(await page.textContent('#problem')).toBe(`Live updates ended: ${detail}`);
    } finally {
      await page.unroute('**/api/executions/*/events');
      await page.evaluate(() => document.getElementById('problem')?.setAttribute('hidden', ''));
    }
  }, 60_000);

  it('replays an execution as a new one linked to it, and retries a dead letter', async () => {
    await open('ingest');
    await page.click('#send-test');
    await page.waitForSelector('#test-response:not([hidden])');
    await page.locator('#executions tbody tr').first().getByRole('button').click();
    await page.waitForSelector('#run-log li');
    const original = ((await page.textContent('#run-title')) ?? '').split(' · ')[1];
    await page.click('#replay');
    await expect.poll(() => page.textContent('#run-summary')).toContain(`replay of ${original}`);
    await expect.poll(() => page.textContent('#run-summary')).toContain('succeeded');
    // A dead letter: the doomed workflow fails once, with no attempt left.
    await open('doomed');
    await page.click('#send-test');
    await page.waitForSelector('#test-response:not([hidden])');
    await expect.poll(() => page.locator('#executions tbody tr').count()).toBe(1);
    await page.locator('#executions tbody tr').first().getByRole('button').click();
    await expect.poll(() => page.isVisible('#retry-dead'), { timeout: 10_000 }).toBe(true);
    expect(await page.textContent('#run-action-status')).toContain('Dead-lettered');
    await page.click('#retry-dead');
    await expect.poll(() => page.textContent('#run-summary')).toContain('replay of');
    // Retrying the same dead letter twice: the second is refused, and says so.
    await page.locator('#executions tbody tr').last().getByRole('button').click();
    await page.waitForSelector('#retry-dead:not([hidden])');
    await page.click('#retry-dead');
    await expect.poll(() => page.textContent('#problem')).toContain('Retry refused');
  }, 60_000);

  it('Replay and Retry are disabled while in flight: a double click sends one request, a replay carries an Idempotency-Key, and one clicked again after a lost answer starts nothing new', async () => {
    await open('ingest');
    await page.click('#send-test');
    await page.waitForSelector('#test-response:not([hidden])');
    await page.locator('#executions tbody tr').first().getByRole('button').click();
    await page.waitForSelector('#run-log li');
    const original = ((await page.textContent('#run-title')) ?? '').split(' · ')[1] ?? '';
    expect(original).not.toBe('');
    const replaysOf = async () => {
      const res = await fetch(`${admin}/api/executions?limit=1000`);
      const { items } = (await res.json()) as { items: { id: string; replayOf?: string }[] };
      return items.filter((e) => e.replayOf === original).map((e) => e.id);
    };
    /** The POSTs sent, by the path's last segment, with their Idempotency-Key. */
    const sent: { action: string; key: string | undefined }[] = [];
    const onRequest = (request: Request) => {
      if (request.method() !== 'POST') return;
      const action = new URL(request.url()).pathname.split('/').pop() ?? '';
      if (action === 'replay' || action === 'retry')
        sent.push({ action, key: request.headers()['idempotency-key'] });
    };
    page.on('request', onRequest);
    // Answers a little late, so that the second click lands while the first is in flight.
    const late = async (route: Route) => {
      await new Promise((resolve) => setTimeout(resolve, 300));
      await route.continue();
    };
    try {
      await page.route('**/api/executions/*/replay', late);
      await page.dblclick('#replay');
      await expect.poll(() => page.textContent('#run-summary')).toContain(`replay of ${original}`);
      expect(sent).toEqual([{ action: 'replay', key: expect.stringMatching(/^[0-9a-f]{32}$/) }]);
      expect(await replaysOf()).toHaveLength(1);
      expect(await page.isEnabled('#replay')).toBe(true);
      await page.unroute('**/api/executions/*/replay', late);

      // A replay that reached the server but whose answer was lost: clicked again, it
      // sends the same key and is answered with the execution it started.
      await page.locator('#executions tbody tr', { hasText: original }).getByRole('button').click();
      await expect.poll(() => page.textContent('#run-title')).toContain(original);
      const lost = async (route: Route) => {
        await route.fetch();
        await route.abort('connectionreset');
      };
      await page.route('**/api/executions/*/replay', lost);
      await page.click('#replay');
      await expect.poll(() => page.textContent('#problem')).toContain('Replay refused');
      expect(await replaysOf()).toHaveLength(2);
      await page.unroute('**/api/executions/*/replay', lost);
      await page.click('#replay');
      await expect.poll(() => page.textContent('#run-summary')).toContain(`replay of ${original}`);
      expect(await replaysOf()).toHaveLength(2);
      const keys = sent.map((s) => s.key);
      expect(keys[1]).not.toBe(keys[0]);
      expect(keys[2]).toBe(keys[1]);

      // Retry: a double click sends one retry (the second was refused: already retried).
      await open('doomed');
      await page.click('#send-test');
      await page.waitForSelector('#test-response:not([hidden])');
      await page.locator('#executions tbody tr').first().getByRole('button').click();
      await expect.poll(() => page.isVisible('#retry-dead'), { timeout: 10_000 }).toBe(true);
      await page.route('**/api/dead-letters/*/retry', late);
      sent.length = 0;
      await page.dblclick('#retry-dead');
      await expect.poll(() => page.textContent('#run-summary')).toContain('replay of');
      expect(sent).toEqual([{ action: 'retry', key: undefined }]);
      expect(await page.isHidden('#problem')).toBe(true);
      await page.unroute('**/api/dead-letters/*/retry', late);
    } finally {
      page.off('request', onRequest);
      await page.unrouteAll();
      await page.evaluate(() => document.getElementById('problem')?.setAttribute('hidden', ''));
    }
  }, 60_000);

  it('Automatic IO learning: the schemas proposed from test traffic, the block to accept, samples forgotten', async () => {
    await open('learner');
    await page.waitForSelector('#learning:not([hidden])');
    // The panel shows before its proposal has loaded: waited for, not read at once.
    await expect.poll(() => page.textContent('#learning-summary')).toContain('0 request(s)');
    for (const body of ['{"id": 1, "name": "a"}', '{"id": 2, "tags": ["x"]}']) {
      await page.fill('#test-body', body);
      await page.click('#send-test');
      await expect.poll(() => page.textContent('#response-status')).toBe('200');
      await page.click('#reload-proposal');
    }
    await expect.poll(() => page.textContent('#learning-summary')).toContain('2 request(s)');
    const input = JSON.parse((await page.textContent('#proposal-input')) ?? '{}') as {
      required?: string[];
      properties?: Record<string, unknown>;
    };
    expect(input.required).toEqual(['id']);
    expect(Object.keys(input.properties ?? {}).sort()).toEqual(['id', 'name', 'tags']);
    expect(await page.textContent('#proposal-manifest')).toContain('jsonSchema');
    await page.click('#copy-manifest');
    expect(await page.evaluate(() => navigator.clipboard.readText())).toContain('mode: automatic');
    await page.click('#reset-samples');
    await expect.poll(() => page.textContent('#learning-summary')).toContain('0 request(s)');
  }, 60_000);

  it('a trigger deleted while its page is open: sending says so clearly', async () => {
    await open('ingest');
    await rt.apply(
      'flows.yaml',
      manifests.filter((m) => m.metadata.name !== 'ingest'),
      ['secure'],
    );
    await page.click('#send-test');
    await expect.poll(() => page.textContent('#problem')).toContain('no longer deployed');
    expect(await page.isHidden('#problem')).toBe(false);
    await page.reload();
    await expect.poll(() => page.textContent('#problem')).toContain('does not exist');
    await rt.apply('flows.yaml', manifests, ['ingest', 'secure']);
  });

  it('works on a phone-width screen: nothing wider than the screen but the scrolling tables', async () => {
    const phone = await context.newPage();
    await phone.setViewportSize({ width: 390, height: 844 });
    await phone.goto(`${admin}/dashboard/flows?trigger=default/ingest`);
    await phone.waitForSelector('#conditions li');
    const overflow = await phone.evaluate(
      () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
    );
    expect(overflow).toBeLessThanOrEqual(0);
    await phone.screenshot({ path: 'test-results/flows-phone.png', fullPage: true });
    await phone.close();
  });
});
