// AuthorizedEventSource (the dashboard's EventSource that sends the admin token) against
// streams Chromium is handed by a route, not the server: what it resumes from when a
// stream breaks in the middle of a frame. As an EventSource, the last event ID is the
// one of the last event dispatched: an `id` line whose frame never ended is not taken,
// or the reconnection (Last-Event-ID) would skip that event.
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { CHROMIUM, CHROMIUM_FLAGS, skipBrowserTests } from '../support/chromium.ts';

const skip = skipBrowserTests();

describe.skipIf(skip)('AuthorizedEventSource', () => {
  let rt: TestRuntime;
  let admin: string;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    rt = await startRuntime();
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

  it('resumes after the last event dispatched, not after an id whose frame was cut', async () => {
    const asked: (string | undefined)[] = [];
    await page.route('**/test-stream', async (route) => {
      asked.push(route.request().headers()['last-event-id']);
      // The first answer breaks after event 2's id line; the second ends the stream
      // (204: no reconnecting).
      if (asked.length === 1)
        await route.fulfill({
          status: 200,
          contentType: 'text/event-stream',
          body: 'retry: 10\n\nid: 1\nevent: step\ndata: "one"\n\nid: 2\nevent: step\n',
        });
      else await route.fulfill({ status: 204 });
    });
    await page.goto(`${admin}/dashboard`);
    // A string: the test's own transform would rewrite an import() in a function.
    const seen = await page.evaluate<string[]>(`(async () => {
      const { AuthorizedEventSource } = await import('/dashboard/common.js');
      const source = new AuthorizedEventSource('/test-stream');
      const events = [];
      source.addEventListener('step', (event) => events.push(event.lastEventId + ':' + event.data));
      await new Promise((resolve) => {
        source.addEventListener('error', () => {
          if (source.readyState === AuthorizedEventSource.CLOSED) resolve();
        });
      });
      return events;
    })()`);
    expect(seen).toEqual(['1:"one"']);
    expect(asked).toEqual([undefined, '1']);
  });
});
