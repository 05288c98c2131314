// The per-run log's input/output summaries and the event timestamps: the engine reuses
// summaries from node to node and makes the trigger record's only when it is read, so
// these pin that what is read is what summarize() of the value would give.
import { afterEach, describe, expect, it } from 'vitest';
import { InProcessEngine } from '../../runtime/engine/engine.ts';
import { MemoryExecutionStore } from '../../runtime/engine/execution-store.ts';
import type { Execution, SequencedEvent } from '../../runtime/engine/ports.ts';
import { isoTime } from '../../runtime/time.ts';
import { summarize, toJson, toJsonSummarized } from '../../runtime/engine/util.ts';
import { finished, ref, run, storedExecution, trigger, workflow } from './helpers.ts';

const engines: InProcessEngine[] = [];
function engine(options: ConstructorParameters<typeof InProcessEngine>[0] = {}): InProcessEngine {
  const e = new InProcessEngine({ onInternalError: () => {}, ...options });
  engines.push(e);
  return e;
}
afterEach(async () => {
  await Promise.all(engines.splice(0).map((e) => e.close(1000)));
});

async function events(e: InProcessEngine, id: string): Promise<SequencedEvent[]> {
  const got: SequencedEvent[] = [];
  e.subscribe(id, 0, (event) => got.push(event));
  await new Promise((resolve) => setTimeout(resolve, 5));
  return got;
}

describe('summaries in the per-run log', () => {
  it('are summarize() of each node input and output, as stored and as read', async () => {
    const e = engine();
    const body = { n: 2, text: 'é"\\\n\u2028', list: [1, null, 'x'] };
    const execution = await run(
      e,
      [
        { id: 'a', type: 'transform', expression: '{ "n": body.n, "list": body.list }' },
        { id: 'check', type: 'if', condition: 'n > 1' },
        { id: 'nothing', type: 'transform', expression: 'missing' },
        { id: 'b', type: 'transform', expression: '$trigger.body' },
      ],
      body,
    );
    expect(execution.status).toBe('succeeded');
    const a = { n: 2, list: [1, null, 'x'] };
    expect(execution.log.map((r) => [r.nodeId, r.inputSummary, r.outputSummary])).toEqual([
      ['a', summarize(execution.input), summarize(a)],
      ['check', summarize(a), summarize(a)],
      ['nothing', summarize(a), undefined],
      ['b', 'undefined', summarize(body)],
    ]);
    expect('outputSummary' in (execution.log[2] as object)).toBe(false);
    // The same through JSON (the Redis store, API responses) and in the events.
    const parsed = JSON.parse(JSON.stringify(execution)) as Execution;
    expect(parsed.log).toEqual(execution.log);
    const finishedEvents = (await events(e, execution.id)).filter(
      (ev) => ev.type === 'node.finished',
    );
    expect(finishedEvents.map((ev) => ('outputSummary' in ev ? ev.outputSummary : '-'))).toEqual(
      execution.log.map((r) => r.outputSummary ?? '-'),
    );
  });

  it('are cut to summaryLength with an ellipsis, the trigger record too', async () => {
    const e = engine({ summaryLength: 16 });
    const execution = await run(
      e,
      [
        { id: 'a', type: 'transform', expression: 'body' },
        { id: 'd', type: 'delay', duration: '0ms' },
      ],
      { long: 'x'.repeat(100) },
    );
    const [a, d] = execution.log;
    expect(a?.inputSummary).toBe(`${JSON.stringify(execution.input).slice(0, 16)}…`);
    expect(a?.outputSummary).toBe('{"long":"xxxxxxx…');
    expect(d?.inputSummary).toBe('{"long":"xxxxxxx…');
    expect(d?.outputSummary).toBe('{"long":"xxxxxxx…');
  });

  it('the first node passing the trigger record on summarises it for its event', async () => {
    const e = engine();
    const s = await e.start({
      workflow: workflow([{ id: 'check', type: 'if', condition: 'true' }]),
      trigger: ref(),
      input: trigger({ k: 1 }),
    });
    const execution = await finished(e, s.id);
    const summary = summarize(execution.input);
    expect(execution.log[0]).toMatchObject({ inputSummary: summary, outputSummary: summary });
    const done = (await events(e, s.id)).find((ev) => ev.type === 'node.finished');
    expect(done).toMatchObject({ outputSummary: summary });
    expect(execution.output).toEqual(execution.input);
  });

  it('a copy read from the store while the run is in progress carries them', async () => {
    const store = new MemoryExecutionStore();
    const e = engine({ store });
    const s = await e.start({
      workflow: workflow([
        { id: 'a', type: 'transform', expression: '{ "v": 1 }' },
        { id: 'wait', type: 'delay', duration: '30ms' },
      ]),
      trigger: ref(),
      input: trigger({ k: 2 }),
    });
    await new Promise((resolve) => setTimeout(resolve, 10));
    const running = (await store.get(s.id)) as Execution;
    expect(running.status).toBe('running');
    expect(running.log[0]?.inputSummary).toBe(summarize(running.input));
    expect(Object.getOwnPropertyDescriptor(running.log[0], 'inputSummary')?.value).toBe(
      summarize(running.input),
    );
    await finished(e, s.id);
  });

  it('jumps and the following node both work without a per-run index', async () => {
    const e = engine();
    const nodes = [
      { id: 'start', type: 'transform' as const, expression: '0', next: 'inc' },
      { id: 'done', type: 'transform' as const, expression: '{ "n": $ }', next: 'end' },
      { id: 'inc', type: 'transform' as const, expression: '$ + 1' },
      { id: 'check', type: 'if' as const, condition: '$ < 3', then: 'inc', else: 'done' },
      { id: 'end', type: 'transform' as const, expression: '$' },
    ];
    const wf = workflow(nodes);
    for (let i = 0; i < 2; i++) {
      const s = await e.start({ workflow: wf, trigger: ref(), input: trigger({}) });
      const execution = await finished(e, s.id);
      expect(execution.output).toEqual({ n: 3 });
      expect(execution.log.map((r) => r.nodeId)).toEqual([
        'start',
        'inc',
        'check',
        'inc',
        'check',
        'inc',
        'check',
        'done',
        'end',
      ]);
    }
  });
});

describe('util', () => {
  it('toJsonSummarized is toJson and summarize of the copy', () => {
    const values: unknown[] = [
      undefined,
      null,
      0,
      -0,
      1e21,
      Number.NaN,
      'a"b\\c\u0000\ud800',
      true,
      [1, undefined, () => 1, { a: undefined }],
      { b: 1, a: [{}], 2: 'two', 1: 'one', ['__proto__']: { x: 1 } },
      JSON.parse('{"__proto__": {"y": 2}}'),
      { when: new Date(0) },
      () => 1,
      Object.assign([1, 2], { sequence: true }),
      { long: 'z'.repeat(2000) },
    ];
    for (const value of values) {
      const { json, summary } = toJsonSummarized(value, 1024);
      expect(json).toEqual(toJson(value));
      expect(summary).toBe(summarize(toJson(value), 1024));
    }
  });

  it('isoTime is toISOString of the millisecond asked, or of now', () => {
    for (const ms of [0, 1, 1_700_000_000_123, 1_700_000_000_123, 1_700_000_000_124]) {
      expect(isoTime(ms)).toBe(new Date(ms).toISOString());
    }
    const before = Date.now();
    const now = Date.parse(isoTime());
    expect(now).toBeGreaterThanOrEqual(before);
    expect(now).toBeLessThanOrEqual(Date.now());
  });
});

describe('memory store eviction', () => {
  it('drops the oldest first at any size, and not an id saved again after it expired', async () => {
    let now = Date.parse('2026-01-01T00:00:00Z');
    const store = new MemoryExecutionStore({ maxExecutions: 100, ttlMs: 1000, now: () => now });
    const make = (id: string): Execution => storedExecution(id, now);
    await store.save(make('again'));
    now += 2000;
    expect(await store.get('again')).toBeUndefined(); // expired, dropped on read
    await store.save(make('again'));
    for (let i = 0; i < 5000; i++) await store.save(make(`e${i}`));
    expect(store.size).toBe(100);
    expect(await store.get('again')).toBeUndefined();
    expect(await store.get('e4899')).toBeUndefined();
    expect((await store.list({ limit: 1000 })).map((x) => x.id)).toEqual(
      Array.from({ length: 100 }, (_, i) => `e${4999 - i}`),
    );
    // Once saved again, an id is kept like any new one, whatever stale place it had.
    const small = new MemoryExecutionStore({ maxExecutions: 3, ttlMs: 1000, now: () => now });
    await small.save(make('x'));
    now += 2000;
    expect(await small.get('x')).toBeUndefined();
    await small.save(make('x'));
    await small.save(make('y'));
    await small.save(make('z'));
    expect(small.size).toBe(3);
    expect((await small.list({})).map((x) => x.id).sort()).toEqual(['x', 'y', 'z']);
    await small.save(make('w'));
    expect((await small.list({})).map((x) => x.id).sort()).toEqual(['w', 'y', 'z']);
  });
});
