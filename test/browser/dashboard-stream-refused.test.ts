// The dashboard's live stream refused for now by the server's caps on open streams
// (503 streams-exhausted, 429 execution-streams-exceeded, with Retry-After), in headless
// Chromium over the real runtime: it keeps trying after the Retry-After and connects
// once a stream is free, instead of closing for good as for a 404 or a 401.
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { trigger, workflow } from '../support/manifests.ts';
import { CHROMIUM, CHROMIUM_FLAGS, skipBrowserTests } from '../support/chromium.ts';

const skip = skipBrowserTests();
const WF = '/webhook/default_production_long';

describe.skipIf(skip)("the dashboard's live stream refused by the stream caps", () => {
  let rt: TestRuntime;
  let base: string;
  let admin: string;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    // One open stream in the whole process.
    rt = await startRuntime({ budgets: { streamsPerProcess: 1 } });
    await rt.apply(
      'long.yaml',
      [
        workflow('long', { nodes: [{ id: 'wait', type: 'delay', duration: '20s' }] }),
        trigger('long', { workflowRef: { name: 'long' }, response: { mode: 'ackSubscribe' } }),
      ],
      ['long'],
    );
    base = await rt.app.listen({ port: 0, host: '127.0.0.1' });
    admin = await rt.admin.listen({ port: 0, host: '127.0.0.1' });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_FLAGS });
    page = await browser.newPage();
    page.on('pageerror', (error) => {
      throw error;
    });
  });
  afterAll(async () => {
    await browser?.close();
    await rt?.stop();
  });

  it('keeps trying after the Retry-After, and connects once a stream is free', async () => {
    const accepted = await fetch(`${base}${WF}/default`, { method: 'POST' });
    expect(accepted.status).toBe(202);
    const { links } = (await accepted.json()) as { links: { events: string } };
    // The process's one stream, held by an execution link's reader.
    const holder = new AbortController();
    const held = await fetch(`${base}${links.events}`, { signal: holder.signal });
    expect(held.status).toBe(200);

    const refusals: number[] = [];
    page.on('response', (res) => {
      if (res.url().includes('/webhook-events/')) refusals.push(res.status());
    });
    await page.goto(`${admin}/dashboard`);
    await page.fill('#live-path', `${WF}/default`);
    await page.click('#live-connect');
    await expect.poll(() => refusals.length).toBeGreaterThanOrEqual(1);
    expect(refusals[0]).toBe(503);
    expect(await page.textContent('#live-status')).toBe('Connecting…');

    holder.abort();
    await expect
      .poll(() => page.textContent('#live-status'), { timeout: 15_000, interval: 250 })
      .toBe('Connected');
    expect(refusals.at(-1)).toBe(200);
    await page.click('#live-disconnect');
  }, 30_000);
});
