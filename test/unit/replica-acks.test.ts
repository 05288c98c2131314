// The group commit of replica acknowledgements (runtime/engine/replica-acks.ts), with a
// client whose WAIT answers when the test says: what is shared, what waits for the
// next WAIT, and what a failed WAIT tells the caller. (Against real replicas:
// test/engine/replica-acks.test.ts.)
import { describe, expect, it } from 'vitest';
import type { RedisClient } from '../../api/records/redis-client.ts';
import { HttpProblem } from '../../runtime/errors.ts';
import { ReplicaAcks } from '../../runtime/engine/replica-acks.ts';

/**
 * A client whose pipelines (the marker script, then WAIT) wait until `answer` is called;
 * `gone` are executions the script does not find. `checked` lists each script's keys.
 */
function pausedClient(gone: string[] = []) {
  const pending: ((reply: number | Error) => void)[] = [];
  const checked: string[][] = [];
  const client = {
    isCluster: false,
    pipeline() {
      let keys: string[] = [];
      const chain = {
        eval: (_script: string, n: number, ...args: unknown[]) => {
          keys = args.slice(1, n).map(String);
          checked.push(keys);
          return chain;
        },
        wait: () => chain,
        exec: () =>
          new Promise<[Error | null, unknown][]>((resolve, reject) =>
            pending.push((reply) =>
              reply instanceof Error
                ? reject(reply)
                : resolve([
                    [null, keys.flatMap((k, i) => (gone.includes(k) ? [i + 1] : []))],
                    [null, reply],
                  ]),
            ),
          ),
      };
      return chain;
    },
  };
  return {
    client: client as unknown as RedisClient,
    checked,
    /** WAITs sent and not answered yet. */
    get waiting() {
      return pending.length;
    },
    /** Answers the oldest WAIT on the wire. */
    answer(reply: number | Error) {
      pending.shift()?.(reply);
    },
  };
}

const tick = () => new Promise((r) => setImmediate(r));

describe('replica acknowledgements', () => {
  it('shares WAITs: one on the wire, every later caller on the next one', async () => {
    const redis = pausedClient();
    const acks = new ReplicaAcks({ replicas: 1, timeoutMs: 100 });
    const first = acks.confirm(redis.client, 'stream', 'e0');
    await tick();
    expect(redis.waiting).toBe(1);
    // Their writes may have reached Redis after the WAIT out was sent: the next one.
    const later = [
      acks.confirm(redis.client, 'stream', 'e1'),
      acks.confirm(redis.client, 'stream', 'e2'),
    ];
    await tick();
    expect(redis.waiting).toBe(1);
    redis.answer(1);
    await first;
    await tick();
    expect(redis.waiting).toBe(1);
    expect(acks.waits).toBe(2);
    redis.answer(1);
    await Promise.all(later);
    expect(acks.waits).toBe(2);
    expect(acks.counts).toEqual({ confirmed: 3, unconfirmed: 0, failed: 0 });
    // Each WAIT's script checked the executions of its callers.
    expect(redis.checked).toEqual([['e0'], ['e1', 'e2']]);
  });

  it('answers 503 when fewer replicas confirm, and when the WAIT fails, without naming the cause', async () => {
    const redis = pausedClient();
    const acks = new ReplicaAcks({ replicas: 2, timeoutMs: 100 });
    const short = acks.confirm(redis.client, 'stream', 'e1').catch((e: unknown) => e);
    await tick();
    redis.answer(1);
    const shortfall = (await short) as HttpProblem;
    expect(shortfall).toBeInstanceOf(HttpProblem);
    expect(shortfall.code).toBe('HG_ERR_STORE_UNAVAILABLE');
    expect(shortfall.message).toMatch(/1 of the 2 Redis replicas asked for had it within 100 ms/);

    const failing = acks.confirm(redis.client, 'stream', 'e1').catch((e: unknown) => e);
    await tick();
    redis.answer(new Error('connect ECONNREFUSED 10.1.2.3:6379'));
    const failed = (await failing) as HttpProblem;
    expect(failed).toBeInstanceOf(HttpProblem);
    expect(failed.code).toBe('HG_ERR_STORE_UNAVAILABLE');
    expect(failed.headers).toMatchObject({ 'retry-after': '1' });
    expect(failed.message).not.toMatch(/10\.1\.2\.3|ECONNREFUSED/);
    // A failed WAIT does not stop the next one.
    const after = acks.confirm(redis.client, 'stream', 'e1').catch((e: unknown) => e);
    await tick();
    redis.answer(2);
    expect(await after).toBeUndefined();
    expect(acks.counts).toEqual({ confirmed: 1, unconfirmed: 1, failed: 1 });
  });

  it('answers 503 for an execution the marker script does not find (lost in a failover), confirms the others', async () => {
    const redis = pausedClient(['lost']);
    const acks = new ReplicaAcks({ replicas: 1, timeoutMs: 100 });
    const first = acks.confirm(redis.client, 'stream', 'e0');
    await tick();
    const kept = acks.confirm(redis.client, 'stream', 'kept');
    const lost = acks.confirm(redis.client, 'stream', 'lost').catch((e: unknown) => e);
    redis.answer(1);
    await first;
    await tick();
    redis.answer(1);
    await expect(kept).resolves.toBeUndefined();
    const refusal = (await lost) as HttpProblem;
    expect(refusal).toBeInstanceOf(HttpProblem);
    expect(refusal.code).toBe('HG_ERR_STORE_UNAVAILABLE');
    expect(acks.counts).toEqual({ confirmed: 2, unconfirmed: 1, failed: 0 });
  });
});
