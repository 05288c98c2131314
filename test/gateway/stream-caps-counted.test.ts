// The stream caps, counted: an SSE Stream answer's own stream counts toward its
// execution's cap on the webhook listener (as its links' channels do), and every refusal
// by a cap is counted by listener and cap (hookgate_streams_refused_total), with the
// open streams by listener (hookgate_streams_open) and the process's cap
// (hookgate_streams_max) on /metrics.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../support/eventually.ts';
import type { TestRuntime } from '../support/gateway.ts';
import {
  LONG_WORKFLOW_PATH,
  OpenStreams,
  startLongWorkflowRuntime,
} from './support/long-streams.ts';

const PER_EXECUTION = 2;
const PER_PROCESS = 4;

let rt: TestRuntime;
let base: string;
let admin: string;
const wf = LONG_WORKFLOW_PATH;
const streams = new OpenStreams();

beforeAll(async () => {
  ({ rt, base, admin } = await startLongWorkflowRuntime(
    { streamsPerExecution: PER_EXECUTION, streamsPerProcess: PER_PROCESS },
    { stream: 'sseStream' },
  ));
});
afterAll(async () => {
  streams.closeAll();
  await rt.stop();
});

function stream(url: string, init: RequestInit = {}): Promise<Response> {
  return streams.open(url, init);
}

/** A sample of /metrics (the webhook listener's), NaN when the series is missing. */
async function metric(series: string): Promise<number> {
  const text = (await rt.app.inject({ method: 'GET', url: '/metrics' })).body;
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return Number(line?.slice(series.length + 1) ?? 'NaN');
}

async function problemType(res: Response): Promise<string> {
  return ((await res.json()) as { type: string }).type.replace(/^.*\//, '');
}

describe('an SSE Stream answer and the stream caps', () => {
  let events: string;
  let executionId: string;

  it("an SSE Stream answer's stream counts toward its execution's cap", async () => {
    const answer = await stream(`${base}${wf}/stream`, { method: 'POST' });
    expect(answer.status).toBe(200);
    const self = answer.headers.get('location') as string;
    executionId = decodeURIComponent(/^\/webhook-executions\/([^/?]+)/.exec(self)?.[1] ?? '');
    events = self.replace('?', '/events?');
    // The answer's stream and one channel: the execution's two.
    expect((await stream(`${base}${events}`)).status).toBe(200);
    const refused = await stream(`${base}${events}`);
    expect(refused.status).toBe(429);
    expect(await problemType(refused)).toBe('execution-streams-exceeded');
  });

  it('the refusals are counted by listener and cap, the open streams by listener', async () => {
    const refusedBy = (listener: string, cap: string) =>
      metric(`hookgate_streams_refused_total{listener="${listener}",cap="${cap}"}`);
    expect(await refusedBy('webhook', 'execution')).toBe(1);
    expect(await refusedBy('webhook', 'process')).toBe(0);
    expect(await refusedBy('admin', 'execution')).toBe(0);
    expect(await refusedBy('admin', 'process')).toBe(0);
    expect(await metric('hookgate_streams_open{listener="webhook"}')).toBe(2);
    expect(await metric('hookgate_streams_open{listener="admin"}')).toBe(0);
    expect(await metric('hookgate_streams_max')).toBe(PER_PROCESS);

    // The process's last two slots on the admin listener, then its refusal there.
    expect((await stream(`${admin}/api/executions/${executionId}/events`)).status).toBe(200);
    const live = `${admin}/webhook-events/default_production_long/stream`;
    expect((await stream(live)).status).toBe(200);
    const exhausted = await stream(live);
    expect(exhausted.status).toBe(503);
    expect(await problemType(exhausted)).toBe('streams-exhausted');
    expect(await refusedBy('admin', 'process')).toBe(1);
    expect(await refusedBy('webhook', 'execution')).toBe(1);
    expect(await metric('hookgate_streams_open{listener="admin"}')).toBe(2);
    expect(await metric('hookgate_streams_open{listener="webhook"}')).toBe(2);

    // Closed, a stream gives its slot back: the gauge follows.
    streams.closeOldest();
    await eventually(async () =>
      expect(await metric('hookgate_streams_open{listener="webhook"}')).toBe(1),
    );
  });
});
