// The group commit of replica acknowledgements (runtime/engine/replica-acks.ts), with a
// client whose WAIT answers when the test says: what is shared, what waits for the
// next WAIT, and what a failed WAIT tells the caller. (Against real replicas:
// test/engine/replica-acks.test.ts.)
import calculateSlot from 'cluster-key-slot';
import { describe, expect, it } from 'vitest';
import { eventually } from '../support/eventually.ts';
import type { RedisClient } from '../../api/records/redis-client.ts';
import { HttpProblem } from '../../runtime/errors.ts';
import { ReplicaAcks } from '../../runtime/engine/replica-acks.ts';

/** What a cluster client of pausedClient knows. */
interface ClusterView {
  /** Its slot map: slot to master. */
  master: (slot: number) => string;
  /**
   * The node group ioredis checks a pipeline's slots against (default: the master);
   * a pipeline over two is refused before anything is sent, as ioredis does.
   */
  group?: (slot: number) => string;
}

/**
 * A client whose pipelines (marker scripts, then WAIT) wait until `answer` is called;
 * `gone` are executions the scripts do not find, `failMark` says the error of a marker
 * script that fails. `checked` lists each script's keys, `markers` its marker; `cluster` makes it a
 * cluster client.
 */
function pausedClient(
  gone: string[] = [],
  cluster?: ClusterView,
  failMark: (marker: string) => Error | undefined = () => undefined,
) {
  const pending: ((reply: number | Error) => void)[] = [];
  const checked: string[][] = [];
  const markers: string[] = [];
  const client = {
    isCluster: cluster !== undefined,
    slots: cluster ? Array.from({ length: 16384 }, (_, slot) => [cluster.master(slot)]) : undefined,
    pipeline() {
      const scripts: { marker: string; keys: string[] }[] = [];
      const chain = {
        eval: (_script: string, n: number, marker: string, ...args: unknown[]) => {
          scripts.push({ marker, keys: args.slice(0, n - 1).map(String) });
          return chain;
        },
        wait: () => chain,
        exec: () => {
          const group = cluster?.group ?? cluster?.master;
          const groups = new Set(scripts.map((m) => group?.(calculateSlot(m.marker))));
          if (groups.size > 1)
            return Promise.reject(
              new Error(
                'All keys in the pipeline should belong to the same slots allocation group',
              ),
            );
          for (const { marker, keys } of scripts) {
            checked.push(keys);
            markers.push(marker);
          }
          return new Promise<[Error | null, unknown][]>((resolve, reject) =>
            pending.push((reply) =>
              reply instanceof Error
                ? reject(reply)
                : resolve([
                    ...scripts.map(({ marker, keys }): [Error | null, number[]] => [
                      failMark(marker) ?? null,
                      keys.flatMap((k, i) => (gone.includes(k) ? [i + 1] : [])),
                    ]),
                    [null, reply],
                  ]),
            ),
          );
        },
      };
      return chain;
    },
  };
  return {
    client: client as unknown as RedisClient,
    checked,
    markers,
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

  it('on a cluster, shares WAITs between the shards of one master: one per master, a mark per shard', async () => {
    // Shards whose slots two masters serve: a and b on one, c on the other.
    const shards = ['hookgate:{q0}:stream', 'hookgate:{q1}:stream', 'hookgate:{q2}:stream'];
    const [a, b, c] = shards.map((k) => calculateSlot(k));
    const master = (slot: number) => (slot === c ? 'master-2' : 'master-1');
    expect(new Set([a, b, c]).size).toBe(3);
    const redis = pausedClient([], { master });
    const acks = new ReplicaAcks({ replicas: 1, timeoutMs: 100 });
    const confirmed = [
      acks.confirm(redis.client, shards[0] as string, 'e0'),
      acks.confirm(redis.client, shards[2] as string, 'e2'),
    ];
    await tick();
    // One WAIT on each master's connection.
    expect(redis.waiting).toBe(2);
    // b's master has a WAIT out (a's): b joins a's next one, not a queue of its own.
    const later = [
      acks.confirm(redis.client, shards[1] as string, 'e1'),
      acks.confirm(redis.client, shards[0] as string, 'e3'),
    ];
    redis.answer(1);
    redis.answer(1);
    await Promise.all(confirmed);
    await tick();
    expect(redis.waiting).toBe(1);
    redis.answer(1);
    await Promise.all(later);
    expect(acks.waits).toBe(3);
    // The shared WAIT marked each shard in its own slot (a script's keys share a slot).
    expect(redis.markers).toEqual([
      `${shards[0]}:replica-acks`,
      `${shards[2]}:replica-acks`,
      `${shards[1]}:replica-acks`,
      `${shards[0]}:replica-acks`,
    ]);
    expect(redis.checked).toEqual([['e0'], ['e2'], ['e1'], ['e3']]);
    expect(acks.counts).toEqual({ confirmed: 4, unconfirmed: 0, failed: 0 });
  });

  it('splits a group whose slots the client has since learnt two masters serve; a failed WAIT fails only its own', async () => {
    const shards = ['hookgate:{q0}:stream', 'hookgate:{q1}:stream'];
    const [a, b] = shards.map((k) => calculateSlot(k)) as [number, number];
    const redis = pausedClient([], { master: () => 'master-1' });
    const slots = (redis.client as unknown as { slots: string[][] }).slots;
    const acks = new ReplicaAcks({ replicas: 1, timeoutMs: 100 });
    const first = acks.confirm(redis.client, shards[0] as string, 'e0');
    await tick();
    // Both wait for master-1's next WAIT...
    const onB = acks.confirm(redis.client, shards[1] as string, 'e1').catch((e: unknown) => e);
    const onA = acks.confirm(redis.client, shards[0] as string, 'e2');
    // ...when b's slot moves to master-2 (a MOVED taught the client).
    slots[b] = ['master-2'];
    expect(slots[a]).toEqual(['master-1']);
    redis.answer(1);
    await first;
    await tick();
    // A pipeline to each master (one would be refused: its keys on two masters).
    expect(redis.waiting).toBe(2);
    expect(redis.markers.slice(1)).toEqual([
      `${shards[1]}:replica-acks`,
      `${shards[0]}:replica-acks`,
    ]);
    redis.answer(new Error('connection closed'));
    redis.answer(1);
    await expect(onA).resolves.toBeUndefined();
    expect(await onB).toBeInstanceOf(HttpProblem);
    expect(acks.counts).toEqual({ confirmed: 2, unconfirmed: 0, failed: 1 });
  });

  it('sends a pipeline per slot when the client refuses one over its node groups (just after a MOVED)', async () => {
    const shards = ['hookgate:{q0}:stream', 'hookgate:{q1}:stream'];
    const b = calculateSlot(shards[1] as string);
    // The slot map says one master; ioredis' node groups (updated apart from the map
    // on a MOVED) say two.
    const redis = pausedClient([], {
      master: () => 'master-1',
      group: (slot) => (slot === b ? 'new' : 'old'),
    });
    const acks = new ReplicaAcks({ replicas: 1, timeoutMs: 100 });
    const first = acks.confirm(redis.client, shards[0] as string, 'e0');
    await tick();
    const both = [
      acks.confirm(redis.client, shards[0] as string, 'e1'),
      acks.confirm(redis.client, shards[1] as string, 'e2'),
    ];
    redis.answer(1);
    await first;
    await tick();
    expect(redis.waiting).toBe(2);
    redis.answer(1);
    redis.answer(1);
    await Promise.all(both);
    expect(acks.waits).toBe(3); // the refused pipeline sent nothing
    expect(acks.counts).toEqual({ confirmed: 3, unconfirmed: 0, failed: 0 });
  });

  it('fails only the executions of a marker that failed, not the rest of its WAIT', async () => {
    const shards = ['hookgate:{q0}:stream', 'hookgate:{q1}:stream'];
    const redis = pausedClient([], { master: () => 'master-1' }, (marker) =>
      marker === `${shards[1]}:replica-acks` ? new Error('ERR script failed') : undefined,
    );
    const acks = new ReplicaAcks({ replicas: 1, timeoutMs: 100 });
    const first = acks.confirm(redis.client, shards[0] as string, 'e0');
    await tick();
    const kept = acks.confirm(redis.client, shards[0] as string, 'e1');
    const moving = acks.confirm(redis.client, shards[1] as string, 'e2').catch((e: unknown) => e);
    redis.answer(1);
    await first;
    await tick();
    expect(redis.waiting).toBe(1);
    redis.answer(1);
    await expect(kept).resolves.toBeUndefined();
    expect(await moving).toBeInstanceOf(HttpProblem);
    expect(acks.counts).toEqual({ confirmed: 2, unconfirmed: 0, failed: 1 });
  });

  it('joins the WAIT that is due, not a second one beside it, while the one out is being answered', async () => {
    const redis = pausedClient();
    const acks = new ReplicaAcks({ replicas: 1, timeoutMs: 100 });
    const first = acks.confirm(redis.client, 'stream', 'e0');
    await tick();
    const later = [acks.confirm(redis.client, 'stream', 'e1')];
    redis.answer(1);
    // The WAIT out settles, and its successor is sent some microtasks later: a caller
    // on every microtask meanwhile. None may put a second WAIT on the wire.
    for (let n = 2; n < 40; n++) {
      await Promise.resolve();
      later.push(acks.confirm(redis.client, 'stream', `e${n}`));
    }
    await first;
    await tick();
    expect(redis.waiting).toBe(1);
    while (redis.waiting > 0) {
      redis.answer(1);
      await tick();
    }
    await Promise.all(later);
    expect(acks.counts.confirmed).toBe(40);
  });

  it('asks a redirected mark again (MOVED, ASK) once the client has refreshed its slot map', async () => {
    let redirects = 2;
    const redis = pausedClient([], { master: () => 'master-1' }, () =>
      redirects-- > 0 ? new Error('ASK 1234 10.0.0.2:6379') : undefined,
    );
    let refreshed = 0;
    (redis.client as unknown as { refreshSlotsCache: () => void }).refreshSlotsCache = () =>
      void refreshed++;
    const acks = new ReplicaAcks({ replicas: 1, timeoutMs: 100 });
    const confirmed = acks.confirm(redis.client, 'hookgate:{q0}:stream', 'e0');
    for (let answered = 0; answered < 3; answered++) {
      await eventually(() => expect(redis.waiting).toBe(1));
      redis.answer(1);
    }
    await expect(confirmed).resolves.toBeUndefined();
    expect(refreshed).toBe(2);
    expect(acks.waits).toBe(3);
    expect(acks.counts).toEqual({ confirmed: 1, unconfirmed: 0, failed: 0 });
  });
});
