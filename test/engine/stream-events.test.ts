// streamEvents (a worker): events are appended to the store as they come (those of one
// turn of the event loop together), and the history is written again at the end only
// when one of those appends failed.
import { describe, expect, it } from 'vitest';
import { InProcessEngine } from '../../runtime/engine/engine.ts';
import { MemoryExecutionStore } from '../../runtime/engine/execution-store.ts';
import type { SequencedEvent } from '../../runtime/engine/ports.ts';
import { finished, ref, trigger, workflow } from './helpers.ts';

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
    store.failCall = 3; // the batch ending with the completed event
    const errors: string[] = [];
    const { execution, events } = await runOne(store, errors);
    expect(execution.status).toBe('succeeded');
    expect(errors).toEqual(['saving an event']);
    expect(store.calls).toEqual([4, 3, 4, 11]);
    expect(events.map((e) => [e.seq, e.type])).toEqual(types.map((t, i) => [i + 1, t]));
  });
});
