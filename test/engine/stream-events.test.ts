// streamEvents (a worker): each event is appended to the store as it is emitted, and
// the history is written again at the end only when one of those appends failed.
import { describe, expect, it } from 'vitest';
import { InProcessEngine } from '../../runtime/engine/engine.ts';
import { MemoryExecutionStore } from '../../runtime/engine/execution-store.ts';
import type { SequencedEvent } from '../../runtime/engine/ports.ts';
import { finished, route, trigger, workflow } from './helpers.ts';

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
      { id: 'b', type: 'transform', expression: '{ "v": v + 1 }' },
    ]),
    route: route(),
    input: trigger({}),
  });
  const execution = await finished(engine, s.id);
  await engine.close(1000);
  return { execution, events: await store.events(s.id, 0) };
}

describe('InProcessEngine with streamEvents', () => {
  it('appends each event once, as it comes, and nothing again at the end', async () => {
    const store = new CountingStore();
    const { execution, events } = await runOne(store);
    expect(execution.status).toBe('succeeded');
    expect(events.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(store.calls).toEqual([1, 1, 1, 1, 1, 1]);
  });

  it('writes the whole history again when an append failed', async () => {
    const store = new CountingStore();
    store.failCall = 6; // the completed event
    const errors: string[] = [];
    const { execution, events } = await runOne(store, errors);
    expect(execution.status).toBe('succeeded');
    expect(errors).toEqual(['saving an event']);
    expect(store.calls).toEqual([1, 1, 1, 1, 1, 1, 6]);
    expect(events.map((e) => [e.seq, e.type])).toEqual([
      [1, 'queued'],
      [2, 'node.started'],
      [3, 'node.finished'],
      [4, 'node.started'],
      [5, 'node.finished'],
      [6, 'completed'],
    ]);
  });
});
