// Request tracing across what an execution calls: http nodes and Async Callbacks carry
// the webhook request's correlation ID and the caller's W3C Trace Context the gateway
// accepted (by its policy), unchanged; a header the workflow sets itself wins; an
// invalid traceparent is not forwarded. Cases from the W3C Recommendation
// (https://www.w3.org/TR/trace-context/, 3.2 and 3.3). Through the gateway:
// test/gateway/trace-context.test.ts.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { WorkflowNode } from '../../api/v1alpha1/workflow.ts';
import { InProcessEngine } from '../../runtime/engine/engine.ts';
import {
  acceptedTraceContext,
  parseTraceparent,
  parseTracestate,
  tracingHeaders,
} from '../../runtime/engine/outbound/trace-context.ts';
import type { Execution, TriggerOutput } from '../../runtime/engine/ports.ts';
import { eventually } from '../support/eventually.ts';
import { finished, ref, trigger, workflow } from './helpers.ts';
import { startReceiver, type Receiver } from './receiver.ts';

const PARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

describe('traceparent', () => {
  it('forwards a valid version-00 header as it is', () => {
    expect(parseTraceparent(PARENT)).toBe(PARENT);
    expect(parseTraceparent('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00')).toBe(
      '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00',
    );
  });

  it('reads a later version for its first fields and sends version 00, with the sampled bit only', () => {
    expect(parseTraceparent('cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01')).toBe(
      PARENT,
    );
    expect(parseTraceparent('01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff')).toBe(
      PARENT,
    );
    expect(parseTraceparent('01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-fe')).toBe(
      '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00',
    );
    expect(
      parseTraceparent('cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes'),
    ).toBe(PARENT);
  });

  it.each([
    ['absent', undefined],
    ['empty', ''],
    ['version ff', 'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'],
    ['version 00 with more after it', `${PARENT}-extra`],
    ['a later version glued to more', 'cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x'],
    ['upper-case hex', '00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01'],
    ['an all-zero trace id', '00-00000000000000000000000000000000-00f067aa0ba902b7-01'],
    ['an all-zero parent id', '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01'],
    ['a short trace id', '00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01'],
    ['wrong separators', '00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01'],
    ['non-hex flags', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g'],
    ['two headers joined by Node', `${PARENT}, ${PARENT}`],
  ])('ignores %s', (_case, value) => {
    expect(parseTraceparent(value)).toBeUndefined();
  });
});

describe('tracestate', () => {
  it('keeps the list-members, empty ones dropped', () => {
    expect(parseTracestate('rojo=00f067aa0ba902b7, congo=t61rcWkgMzE,,')).toBe(
      'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE',
    );
    expect(parseTracestate('tenant@vendor=a b')).toBe('tenant@vendor=a b');
  });

  it.each([
    ['an upper-case key', 'Rojo=1'],
    ['a value with "="', 'rojo=a=b'],
    ['a member without "="', 'rojo'],
    ['a value with a control character', 'rojo=a\u0001b'],
    ['a key twice', 'rojo=1,rojo=2'],
    ['33 members', Array.from({ length: 33 }, (_, i) => `k${i}=v`).join(',')],
  ])('ignores the header with %s', (_case, value) => {
    expect(parseTracestate(value)).toBeUndefined();
  });

  it('over 512 characters: members over 128 go first, then from the end', () => {
    const long = `big=${'x'.repeat(200)}`;
    const members = Array.from(
      { length: 20 },
      (_, i) => `k${String(i).padStart(2, '0')}=${'v'.repeat(20)}`,
    );
    const kept = parseTracestate([long, ...members].join(','));
    expect(kept).toBeDefined();
    expect(kept).not.toContain('big=');
    expect(kept?.length).toBeLessThanOrEqual(512);
    expect(kept?.startsWith('k00=')).toBe(true);
    // Whole members only, cut from the end.
    const list = kept?.split(',') ?? [];
    expect(list).toEqual(members.slice(0, list.length));
    expect(list.length).toBe(20);
    const many = Array.from(
      { length: 30 },
      (_, i) => `k${String(i).padStart(2, '0')}=${'v'.repeat(30)}`,
    );
    const cut = parseTracestate(many.join(',')) ?? '';
    expect(cut.length).toBeLessThanOrEqual(512);
    expect(cut.split(',')).toEqual(many.slice(0, cut.split(',').length));
  });

  it('long members go one at a time, from the end, only as many as needed', () => {
    const member = (key: string, n: number) => `${key}=${'v'.repeat(n - key.length - 1)}`;
    // 200 + 100 + 200 + 50 characters and 3 commas: dropping c alone fits.
    const [a, b, c, d] = [member('a', 200), member('b', 100), member('c', 200), member('d', 50)];
    expect(parseTracestate([a, b, c, d].join(','))).toBe([a, b, d].join(','));
    // Three long ones of 252 (758 in all): the last goes, two fit (505).
    const three = ['x', 'y', 'z'].map((k) => member(k, 252));
    expect(parseTracestate(three.join(','))).toBe(three.slice(0, 2).join(','));
  });
});

describe('the gateway accepts a trace context by its policy', () => {
  const headers = { traceparent: PARENT, tracestate: 'rojo=1' };
  it('authenticated (default): from callers of endpoints with auth only', () => {
    expect(acceptedTraceContext('authenticated', true, headers)).toEqual(headers);
    expect(acceptedTraceContext('authenticated', false, headers)).toEqual({});
  });
  it('all: from any caller; off: from none', () => {
    expect(acceptedTraceContext('all', false, headers)).toEqual(headers);
    expect(acceptedTraceContext('off', true, headers)).toEqual({});
  });
  it('an invalid traceparent takes its tracestate with it', () => {
    expect(
      acceptedTraceContext('all', true, { traceparent: 'garbage', tracestate: 'rojo=1' }),
    ).toEqual({});
    expect(acceptedTraceContext('all', true, { traceparent: PARENT, tracestate: 'Bad=1' })).toEqual(
      {
        traceparent: PARENT,
      },
    );
  });
});

describe('tracingHeaders', () => {
  const input = (metadata: Partial<TriggerOutput['metadata']>): TriggerOutput => {
    const t = trigger({});
    Object.assign(t.metadata, metadata);
    return t;
  };

  it('the correlation ID always; the trace context the gateway accepted', () => {
    expect(tracingHeaders(input({}))).toEqual({ 'x-correlation-id': 'corr-1' });
    expect(tracingHeaders(input({ traceparent: PARENT, tracestate: 'rojo=1' }))).toEqual({
      'x-correlation-id': 'corr-1',
      traceparent: PARENT,
      tracestate: 'rojo=1',
    });
    // What the caller sent among the headers, not accepted, is not sent on.
    const sent = input({});
    sent.headers = { traceparent: PARENT };
    expect(tracingHeaders(sent)).toEqual({ 'x-correlation-id': 'corr-1' });
  });

  it('leaves to the workflow a header it sets itself, in any case', () => {
    const sent = input({ traceparent: PARENT, tracestate: 'rojo=1' });
    expect(tracingHeaders(sent, { 'X-Correlation-ID': 'mine', TraceParent: 'x' })).toEqual({});
    expect(tracingHeaders(sent, { TraceState: 'mine=1' })).toEqual({
      'x-correlation-id': 'corr-1',
      traceparent: PARENT,
    });
  });
});

describe('what an execution sends', () => {
  let receiver: Receiver;
  beforeAll(async () => {
    receiver = await startReceiver(() => ({
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: '{}',
    }));
  });
  afterAll(() => receiver.close());
  const engines: InProcessEngine[] = [];
  afterEach(async () => {
    await Promise.all(engines.splice(0).map((e) => e.close(5000)));
  });
  function engine(): InProcessEngine {
    const e = new InProcessEngine({
      onInternalError: () => {},
      outbound: { allow: [`127.0.0.1:${receiver.port}`] },
      httpBackoffMs: 1,
      callbacks: { backoffMs: 1, maxAttempts: 1, timeoutMs: 2000 },
    });
    engines.push(e);
    return e;
  }
  async function run(
    nodes: Partial<WorkflowNode>[],
    accepted: Partial<TriggerOutput['metadata']>,
    callbackUrl?: string,
  ): Promise<Execution> {
    const e = engine();
    const input = trigger({ n: 1 });
    Object.assign(input.metadata, accepted);
    const started = await e.start({
      workflow: workflow(nodes),
      trigger: ref(),
      input,
      ...(callbackUrl ? { callbackUrl } : {}),
    });
    const done = await finished(e, started.id);
    if (!callbackUrl) return done;
    return eventually(async () => {
      const stored = await e.get(started.id);
      if (!stored?.callback) throw new Error('callback not recorded yet');
      return stored;
    });
  }
  const call = (headers?: Record<string, string>): Partial<WorkflowNode> => ({
    id: 'call',
    type: 'http',
    request: {
      method: 'POST',
      url: `${receiver.url}/downstream`,
      timeout: '2s',
      retries: 0,
      ...(headers ? { headers } : {}),
    },
  });
  const last = () => receiver.received.at(-1)?.headers ?? {};

  it('an http node carries the caller’s trace context and the correlation ID', async () => {
    const done = await run([call()], { traceparent: PARENT, tracestate: 'rojo=00f067aa0ba902b7' });
    expect(done.status).toBe('succeeded');
    expect(last()).toMatchObject({
      traceparent: PARENT,
      tracestate: 'rojo=00f067aa0ba902b7',
      'x-correlation-id': 'corr-1',
    });
  });

  it('without an accepted traceparent none is sent (none is made up)', async () => {
    await run([call()], {});
    expect(last().traceparent).toBeUndefined();
    expect(last().tracestate).toBeUndefined();
    expect(last()['x-correlation-id']).toBe('corr-1');
  });

  it('a header the node sets itself wins', async () => {
    await run([call({ 'X-Correlation-ID': 'set-by-node', traceparent: 'node-value' })], {
      traceparent: PARENT,
    });
    expect(last()['x-correlation-id']).toBe('set-by-node');
    expect(last().traceparent).toBe('node-value');
  });

  it('an Async Callback carries them too', async () => {
    const done = await run(
      [{ id: 'done', type: 'transform', expression: '{ "done": true }' }],
      { traceparent: PARENT },
      `${receiver.url}/callback`,
    );
    expect(done.callback).toMatchObject({ delivered: true });
    const received = receiver.received.at(-1);
    expect(received?.url).toBe('/callback');
    expect(received?.headers).toMatchObject({
      traceparent: PARENT,
      'x-correlation-id': 'corr-1',
      'webhook-id': `msg_${done.id}`,
    });
  });
});
