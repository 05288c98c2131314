// streamEvents (a worker): events are appended to the store as they come (those of one
// turn of the event loop together), the terminal one with the final record (in one
// step where the store has `saveWithEvents`, with the job's acknowledgement), and the
// history is written again at the end only when one of those appends failed. A resumed
// run (a worker's job) writes its running record with its first events.
import { describe, expect, it } from 'vitest';
import { InProcessEngine } from '../../runtime/engine/engine.ts';
import { MemoryExecutionStore } from '../../runtime/engine/execution-store.ts';
import type { Execution, SequencedEvent } from '../../runtime/engine/ports.ts';
import { finished, queuedExecution, ref, trigger, workflow } from './helpers.ts';

class CountingStore extends MemoryExecutionStore {
  calls: number[] = [];
  /** The call (1, 2, …) that fails. */
  failCall = 0;
  override appendEvents(events: SequencedEvent[]): Promise<void> {
    this.calls.push(events.length);
    if (this.calls.length === this.failCall) return Promise.reject(new Error('store hiccup'));
    return super.appendEvents(events);
  }
}

/** A store with `saveWithEvents` (as Redis has): records what each of them wrote. */
class FinishingStore extends CountingStore {
  finishes: { status: string; events: string[]; acknowledge?: string }[] = [];
  saves: string[] = [];
  failFinish = false;
  override save(execution: Execution): Promise<void> {
    this.saves.push(execution.status);
    return super.save(execution);
  }
  async saveWithEvents(
    execution: Execution,
    events: SequencedEvent[],
    acknowledge?: string,
  ): Promise<void> {
    if (this.failFinish) throw new Error('store gone');
    this.finishes.push({
      status: execution.status,
      events: events.map((e) => e.type),
      ...(acknowledge ? { acknowledge } : {}),
    });
    await super.save(execution);
    await MemoryExecutionStore.prototype.appendEvents.call(this, events);
  }
}

async function runOne(store: CountingStore, errors: string[] = []) {
  const engine = new InProcessEngine({
    store,
    streamEvents: true,
    onInternalError: (_error, where) => errors.push(where),
  });
  const s = await engine.start({
    workflow: workflow([
      { id: 'a', type: 'transform', expression: '{ "v": 1 }' },
      { id: 'd', type: 'delay', duration: '20ms' },
      { id: 'r', type: 'respond' },
      { id: 'b', type: 'transform', expression: '{ "v": v + 1 }' },
    ]),
    trigger: ref(),
    input: trigger({}),
  });
  // When the respond event reaches a listener, the store has it already.
  let storedAtRespond: number[] = [];
  engine.subscribe(s.id, 0, (event) => {
    if (event.type === 'respond') storedAtRespond = [...store.calls];
  });
  const execution = await finished(engine, s.id);
  await engine.close(1000);
  return { execution, events: await store.events(s.id, 0), storedAtRespond };
}

const types = [
  'queued',
  'node.started',
  'node.finished',
  'node.started',
  'node.finished',
  'node.started',
  'respond',
  'node.finished',
  'node.started',
  'node.finished',
  'completed',
];

describe('InProcessEngine with streamEvents', () => {
  it('appends the events of a turn of the event loop together, and nothing again at the end', async () => {
    const store = new CountingStore();
    const { execution, events, storedAtRespond } = await runOne(store);
    expect(execution.status).toBe('succeeded');
    expect(events.map((e) => [e.seq, e.type])).toEqual(types.map((t, i) => [i + 1, t]));
    // Up to the delay's start; then the delay ends and respond goes at once; the rest
    // with the completed event.
    expect(store.calls).toEqual([4, 3, 4]);
    expect(storedAtRespond).toEqual([4, 3]);
  });

  it('writes the whole history again when an append failed', async () => {
    const store = new CountingStore();
    store.failCall = 2; // the batch ending with the respond event
    const errors: string[] = [];
    const { execution, events } = await runOne(store, errors);
    expect(execution.status).toBe('succeeded');
    expect(errors).toEqual(['saving an event']);
    expect(store.calls).toEqual([4, 3, 11]);
    expect(events.map((e) => [e.seq, e.type])).toEqual(types.map((t, i) => [i + 1, t]));
  });

  it('a store that can: the final record and the last events in one call, the terminal event only there', async () => {
    const store = new FinishingStore();
    const { execution, events } = await runOne(store);
    expect(execution.status).toBe('succeeded');
    expect(store.calls).toEqual([4, 3]);
    expect(store.finishes).toEqual([
      {
        status: 'succeeded',
        events: ['node.finished', 'node.started', 'node.finished', 'completed'],
      },
    ]);
    expect(events.map((e) => [e.seq, e.type])).toEqual(types.map((t, i) => [i + 1, t]));
  });

  it('a run whose saveWithEvents fails stores no terminal event, so the run that takes the job again ends it once', async () => {
    const store = new FinishingStore();
    store.failFinish = true;
    const errors: string[] = [];
    const { events } = await runOne(store, errors);
    expect(errors).toContain('saving execution');
    expect(events.map((e) => e.type)).toEqual(types.slice(0, 7)); // up to respond
    expect(store.finishes).toEqual([]);
  });

  it('a resumed run: the running record goes with its first events, the job is acknowledged with the final record', async () => {
    const store = new FinishingStore();
    const { engine, execution, request } = await queuedRecord(store);
    const acknowledged = await engine.resume(request, execution, 1, 1, '1700000000000-0');
    expect(acknowledged).toBe(true);
    expect(store.saves).toEqual(['queued']); // the queued record only, written by the test
    expect(store.finishes).toEqual([
      { status: 'running', events: ['node.started', 'node.finished', 'node.started'] },
      {
        status: 'succeeded',
        events: ['node.finished', 'node.started', 'node.finished', 'completed'],
        acknowledge: '1700000000000-0',
      },
    ]);
    expect((await store.get(execution.id))?.status).toBe('succeeded');
    await engine.close(1000);
  });

  it('a resumed run that ends in the turn it started: one write, the final record with every event', async () => {
    const store = new FinishingStore();
    const { engine, execution, request } = await queuedRecord(store, [
      { id: 'a', type: 'transform', expression: '{ "v": 1 }' },
    ]);
    expect(await engine.resume(request, execution, 1, 1, '1-0')).toBe(true);
    expect(store.finishes).toEqual([
      {
        status: 'succeeded',
        events: ['node.started', 'node.finished', 'completed'],
        acknowledge: '1-0',
      },
    ]);
    await engine.close(1000);
  });

  it('without a queue entry, or with a store that cannot, the caller acknowledges', async () => {
    const finishing = new FinishingStore();
    const a = await queuedRecord(finishing);
    expect(await a.engine.resume(a.request, a.execution, 1)).toBe(false);
    expect(finishing.finishes.at(-1)?.acknowledge).toBeUndefined();
    const plain = new CountingStore();
    const b = await queuedRecord(plain);
    expect(await b.engine.resume(b.request, b.execution, 1, 1, '1-0')).toBe(false);
    expect((await plain.get(b.execution.id))?.status).toBe('succeeded');
    await Promise.all([a.engine.close(1000), b.engine.close(1000)]);
  });
});

/** An engine streaming to `store`, and a queued record in it (as a gateway writes it). */
async function queuedRecord(
  store: CountingStore,
  nodes: Parameters<typeof workflow>[0] = [
    { id: 'a', type: 'transform', expression: '{ "v": 1 }' },
    { id: 'd', type: 'delay', duration: '20ms' },
    { id: 'b', type: 'transform', expression: '{ "v": v + 1 }' },
  ],
) {
  const engine = new InProcessEngine({ store, streamEvents: true });
  const request = { workflow: workflow(nodes), trigger: ref(), input: trigger({}) };
  const id = `exec_resumed_${Math.random().toString(36).slice(2)}`;
  request.input.metadata.executionId = id;
  const execution = queuedExecution(request);
  await store.save(execution);
  await MemoryExecutionStore.prototype.appendEvents.call(store, [
    { type: 'queued', executionId: id, seq: 1, at: execution.createdAt },
  ]);
  return { engine, execution, request };
}
