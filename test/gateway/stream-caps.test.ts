// Open event streams are capped, over real HTTP: 16 per execution on each listener
// (an execution link's token, the admin API's events: the 17th is 429
// execution-streams-exceeded) and a number per process, both listeners and every kind of
// stream counted (then 503 streams-exhausted; an SSE Stream request is refused before
// its execution starts). Both with Retry-After; closing a stream lets the next one in.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SERVER_LIMITS } from '../../runtime/app.ts';
import { STREAM_RETRY_AFTER_SECONDS } from '../../runtime/gateway/sse.ts';
import { eventually } from '../support/eventually.ts';
import type { TestRuntime } from '../support/gateway.ts';
import {
  LONG_WORKFLOW_PATH,
  OpenStreams,
  startLongWorkflowRuntime,
  type OpenedStream,
} from './support/long-streams.ts';

/** The process's cap here: the 16 of one execution, one admin stream and 3 more. */
const PER_PROCESS = 20;
const PER_EXECUTION = SERVER_LIMITS.streamsPerExecution;

let rt: TestRuntime;
let base: string;
let admin: string;
const wf = LONG_WORKFLOW_PATH;
const streams = new OpenStreams();

beforeAll(async () => {
  // Set as the environment sets it (HOOKGATE_STREAMS_PER_PROCESS, roles/budget-settings.ts).
  ({ rt, base, admin } = await startLongWorkflowRuntime(
    { streamsPerProcess: PER_PROCESS },
    { subscribe: 'ackSubscribe', stream: 'sseStream' },
  ));
});
afterAll(async () => {
  streams.closeAll();
  await rt.stop();
});

async function accept(): Promise<{ executionId: string; links: { events: string } }> {
  const res = await fetch(`${base}${wf}/subscribe`, { method: 'POST' });
  expect(res.status).toBe(202);
  return (await res.json()) as { executionId: string; links: { events: string } };
}

function stream(url: string, init: RequestInit = {}): Promise<OpenedStream> {
  return streams.open(url, init);
}

async function expectRefused(res: Response, status: number, type: string): Promise<void> {
  expect(res.status).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(res.headers.get('retry-after')).toBe(String(STREAM_RETRY_AFTER_SECONDS));
  const problem = (await res.json()) as { type: string; limit: number };
  expect(problem.type).toBe(`https://hookgate.dev/problems/${type}`);
}

describe('open event streams are capped', () => {
  let first: { executionId: string; links: { events: string } };
  const ofFirst: OpenedStream[] = [];

  it(`the ${PER_EXECUTION + 1}th stream of one execution is refused 429; closing one lets a new one in`, async () => {
    first = await accept();
    for (let i = 0; i < PER_EXECUTION; i++) {
      const res = await stream(`${base}${first.links.events}`);
      expect(res.status).toBe(200);
      ofFirst.push(res);
    }
    const refused = await stream(`${base}${first.links.events}`);
    await expectRefused(refused, 429, 'execution-streams-exceeded');
    // The token in the header instead of the query: the same execution, the same cap.
    const [path, query] = first.links.events.split('?token=');
    const byHeader = await stream(`${base}${path}`, {
      headers: { authorization: `Bearer ${query}` },
    });
    await expectRefused(byHeader, 429, 'execution-streams-exceeded');

    ofFirst.shift()?.close();
    const again = await eventually(async () => {
      const res = await stream(`${base}${first.links.events}`);
      if (res.status !== 200) throw new Error(`still ${res.status}`);
      return res;
    });
    expect(again.headers.get('content-type')).toMatch(/^text\/event-stream/);
  });

  it("the admin API's streams of the same execution have a count of their own", async () => {
    const res = await stream(`${admin}/api/executions/${first.executionId}/events`);
    expect(res.status).toBe(200);
    // Open now: 16 of the first execution on the webhook listener, 1 on the admin one.
    expect(streams.size).toBe(PER_EXECUTION + 1);
  });

  it('past the process cap every kind of stream is refused 503, an SSE Stream before it starts anything', async () => {
    const second = await accept();
    while (streams.size < PER_PROCESS) {
      expect((await stream(`${base}${second.links.events}`)).status).toBe(200);
    }
    await expectRefused(await stream(`${base}${second.links.events}`), 503, 'streams-exhausted');
    await expectRefused(
      await stream(`${admin}/api/executions/${second.executionId}/events`),
      503,
      'streams-exhausted',
    );
    await expectRefused(
      await stream(`${admin}/webhook-events/default_production_long/subscribe`),
      503,
      'streams-exhausted',
    );
    const before = (await rt.engine.list({})).length;
    await expectRefused(
      await stream(`${base}${wf}/stream`, { method: 'POST' }),
      503,
      'streams-exhausted',
    );
    expect((await rt.engine.list({})).length).toBe(before);

    // One closed: the next stream, of any kind, gets its slot.
    streams.closeOldest();
    const sse = await eventually(async () => {
      const res = await stream(`${base}${wf}/stream`, { method: 'POST' });
      if (res.status !== 200) throw new Error(`still ${res.status}`);
      return res;
    });
    expect(sse.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(streams.size).toBe(PER_PROCESS);
  });
});
