// The execution key layout (runtime/engine/execution-keys.ts): one Redis with one shard
// keeps the names from before shards; otherwise every key of a shard carries its tag.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  ExecutionLayout,
  MAX_QUEUE_SHARDS,
  SINGLE_REDIS_LAYOUT,
} from '../../runtime/engine/execution-keys.ts';

/** The hash tag of a key: what a Redis Cluster hashes to choose its slot. */
const tagOf = (key: string) => /\{([^}]+)\}/.exec(key)?.[1];

describe('the execution key layout', () => {
  it('one shard on one Redis: untagged names (the index, stream and sets from before shards)', () => {
    const [s] = SINGLE_REDIS_LAYOUT.shards;
    expect(SINGLE_REDIS_LAYOUT.tagged).toBe(false);
    expect(s).toMatchObject({
      index: 'hookgate:executions',
      finished: 'hookgate:executions:finished',
      sizes: 'hookgate:executions:sizes',
      bytes: 'hookgate:executions:bytes',
      stream: 'hookgate:queue:executions',
      retries: 'hookgate:queue:retries',
      executionPrefix: 'hookgate:execution:',
    });
    expect(s?.execution('e1')).toBe('hookgate:execution:e1');
    expect(s?.channel('e1')).toBe('hookgate:exec:e1:events');
    expect(s?.whole('e1', 3)).toBe('hookgate:execution:e1:whole:3');
    expect(SINGLE_REDIS_LAYOUT.deadLetters).toEqual({
      index: 'hookgate:deadletters',
      entries: 'hookgate:deadletters:entries',
      holds: 'hookgate:deadletters:holds',
    });
    expect(SINGLE_REDIS_LAYOUT.streams).toEqual(['hookgate:queue:executions']);
  });

  it('on a cluster or with several shards, every key of a shard carries the tag {s<k>}', () => {
    for (const layout of [
      new ExecutionLayout({ cluster: true }),
      new ExecutionLayout({ shards: 4 }),
      new ExecutionLayout({ shards: 4, cluster: true }),
    ]) {
      expect(layout.tagged).toBe(true);
      for (let i = 0; i < 50; i++) {
        const id = `exec_${randomUUID()}`;
        const s = layout.of(id);
        const keys = [s.index, s.finished, s.sizes, s.bytes, s.stream, s.retries];
        keys.push(
          s.execution(id),
          s.channel(id),
          s.whole(id, 2),
          `${s.executionPrefix}${id}:whole:2`,
        );
        expect(new Set(keys.map(tagOf))).toEqual(new Set([`s${layout.shardOf(id)}`]));
      }
      expect(layout.deadLetters).toEqual({
        index: 'hookgate:{deadletters}',
        entries: 'hookgate:{deadletters}:entries',
        holds: 'hookgate:{deadletters}:holds',
      });
    }
    expect(new ExecutionLayout({ shards: 3 }).shards[2]?.stream).toBe(
      'hookgate:{s2}:queue:executions',
    );
  });

  it('spreads ids evenly over the shards, the same way every time', () => {
    const layout = new ExecutionLayout({ shards: 8 });
    const counts = new Array<number>(8).fill(0);
    for (let i = 0; i < 16_000; i++) counts[layout.shardOf(`exec_${randomUUID()}`)]! += 1;
    for (const n of counts) expect(Math.abs(n - 2_000)).toBeLessThan(300);
    // Another process (a worker) finds the same shard for an id.
    const again = new ExecutionLayout({ shards: 8 });
    expect(again.shardOf('exec_42')).toBe(layout.shardOf('exec_42'));
    expect(layout.shardOf('exec_42')).toBe(layout.shardOf('exec_42'));
  });

  it('refuses a shard count outside 1 … MAX_QUEUE_SHARDS', () => {
    for (const n of [0, -1, 1.5, MAX_QUEUE_SHARDS + 1, Number.NaN])
      expect(() => new ExecutionLayout({ shards: n })).toThrow(RangeError);
  });
});
