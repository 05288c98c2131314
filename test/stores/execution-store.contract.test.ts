// One contract, two adapters: the executions store in memory (embedded, in-gateway
// runs) and in Redis (gateways and workers), against a real redis-server with one and
// with three shards, and a real Redis Cluster of three masters.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  decodeCursor,
  DEFAULT_MAX_TOMBSTONES,
  encodeCursor,
  FINISHED_GRACE_MS,
  MemoryExecutionStore,
  type ExecutionStore,
} from '../../runtime/engine/execution-store.ts';
import {
  RedisExecutionStore,
  resumeBefore,
  type RedisExecutionStoreOptions,
} from '../../runtime/engine/execution-store-redis.ts';
import { EXECUTION_FIELDS, ExecutionLayout } from '../../runtime/engine/execution-keys.ts';
import { shardedSubscriberClient } from '../../api/records/redis-client.ts';
import { redisCluster, singleRedis, type RedisBackend } from '../support/redis-backends.ts';
import type { Execution, SequencedEvent } from '../../runtime/engine/ports.ts';
import { redisAvailable } from '../support/redis.ts';
import { eventually, sleep } from '../support/eventually.ts';
import { trigger } from '../engine/helpers.ts';
import type { BoundedStore } from '../../runtime/bounded.ts';
import { startedRun } from '../../runtime/engine/run-log.ts';
import { summarize } from '../../runtime/engine/util.ts';
import type { WorkflowNode } from '../../api/v1alpha1/workflow.ts';
import {
  deadLetterOf,
  MemoryDeadLetterStore,
  type DeadLetter,
  type DeadLetterStore,
  type DeadLetterStoreOptions,
  type HeldRecord,
  type HeldRecords,
  type TakenDeadLetter,
} from '../../runtime/engine/dead-letters.ts';
import { RedisDeadLetterStore } from '../../runtime/engine/dead-letters-redis.ts';
import { DEFAULT_IDEMPOTENCY_KEYS } from '../../runtime/gateway/idempotency/store.ts';

const HOUR = 3_600_000;
let clock = Date.parse('2026-11-23T12:00:00Z');
const now = () => clock;

function execution(id: string, minutesAgo: number, extra: Partial<Execution> = {}): Execution {
  return {
    id,
    workflowId: 'wf-a',
    triggerKey: 'ns/a',
    status: 'succeeded',
    createdAt: new Date(clock - minutesAgo * 60_000).toISOString(),
    input: trigger({ id }),
    log: [],
    ...extra,
  };
}

function event(executionId: string, seq: number): SequencedEvent {
  return { type: 'queued', executionId, seq, at: new Date(clock).toISOString() };
}

/** Stores made for the contract keep bodies up to this many bytes whole. */
const BODY_MAX = 1024;
const HANDOVER_MS = 300;
const big = (n: number) => ({ text: 'x'.repeat(n) });

interface Made {
  store: ExecutionStore & BoundedStore & HeldRecords;
  /** A dead-letter list whose records are the store's (as the roles wire them). */
  deadLetters: (options?: DeadLetterStoreOptions) => DeadLetterStore & BoundedStore;
  /** `n` ids that fall on one shard (of `shards`: each holds maxBytes / shards). */
  sameShard: (prefix: string, n: number) => string[];
  shards: number;
  /** Time has passed beyond the handover window (on the store's clock, or for real). */
  afterHandover(): Promise<void>;
  /**
   * Whether a queued or running execution outlives its lifetime (Redis, ADR 0036); the
   * memory store counts it from creation alone.
   */
  keepsUnfinished: boolean;
}

type Options = { maxBytes?: number };

function contract(name: string, make: (options?: Options) => Promise<Made>) {
  describe(name, () => {
    let store: ExecutionStore & BoundedStore & HeldRecords;
    let made: Made;
    beforeEach(async () => {
      clock = Date.parse('2026-11-23T12:00:00Z');
      made = await make();
      store = made.store;
    });

    it('saves, replaces and reads back an execution', async () => {
      await store.save(execution('e1', 1, { status: 'running' }));
      await store.save(execution('e1', 1, { status: 'succeeded', output: { ok: true } }));
      expect(await store.get('e1')).toMatchObject({ status: 'succeeded', output: { ok: true } });
      expect(await store.get('nope')).toBeUndefined();
    });

    it("keeps the trigger's uid with the record; a record without one (from before) reads as it was", async () => {
      await store.save(
        execution('with', 2, { triggerUid: '6f1c2a9e-0000-4000-8000-000000000001' }),
      );
      const old = execution('without', 1);
      await store.save(old);
      expect((await store.get('with'))?.triggerUid).toBe('6f1c2a9e-0000-4000-8000-000000000001');
      expect(await store.get('without')).not.toHaveProperty('triggerUid');
      const json = (value: unknown): unknown => JSON.parse(JSON.stringify(value));
      expect(json(await store.get('without'))).toEqual(json(old));
      expect((await store.list({ triggerKey: 'ns/a' })).map((e) => [e.id, e.triggerUid])).toEqual([
        ['without', undefined],
        ['with', '6f1c2a9e-0000-4000-8000-000000000001'],
      ]);
    });

    it('lists newest first with filters, since (inclusive), until (exclusive) and limit', async () => {
      await store.save(execution('old', 30));
      await store.save(execution('mid', 20, { workflowId: 'wf-b', triggerKey: 'ns/b' }));
      await store.save(execution('new', 10, { status: 'failed' }));
      const ids = async (f: Parameters<ExecutionStore['list']>[0]) =>
        (await store.list(f)).map((e) => e.id);
      expect(await ids({})).toEqual(['new', 'mid', 'old']);
      expect(await ids({ limit: 2 })).toEqual(['new', 'mid']);
      expect(await ids({ workflowId: 'wf-a' })).toEqual(['new', 'old']);
      expect(await ids({ triggerKey: 'ns/b' })).toEqual(['mid']);
      expect(await ids({ status: 'failed' })).toEqual(['new']);
      const at = (m: number) => new Date(clock - m * 60_000).toISOString();
      expect(await ids({ since: at(20) })).toEqual(['new', 'mid']);
      expect(await ids({ until: at(10) })).toEqual(['mid', 'old']);
    });

    it('a filter matching few old executions still finds them past many newer ones', async () => {
      await store.save(execution('rare', 50, { workflowId: 'wf-rare' }));
      for (let i = 0; i < 450; i++) await store.save(execution(`n${i}`, 40 - i / 100));
      expect((await store.list({ workflowId: 'wf-rare' })).map((e) => e.id)).toEqual(['rare']);
    });

    it('appends events once per seq, in order, and reads those after a seq', async () => {
      await store.save(execution('e1', 1));
      await store.appendEvents([event('e1', 1), event('e1', 2)]);
      await store.appendEvents([event('e1', 2), event('e1', 3)]); // 2 again: ignored
      expect((await store.events('e1', 0)).map((e) => e.seq)).toEqual([1, 2, 3]);
      expect((await store.events('e1', 2)).map((e) => e.seq)).toEqual([3]);
      expect(await store.events('e1', 3)).toEqual([]);
    });

    it('events appended before the first record: the record is listed once, saved again or not', async () => {
      // (Whether such events are kept is the adapter's choice: memory drops them.)
      await store.appendEvents([event('early', 1)]);
      expect(await store.list({})).toEqual([]);
      await store.save(execution('early', 5, { status: 'running' }));
      await store.save(execution('early', 5));
      await store.save(execution('later', 1, { status: 'running' }));
      expect((await store.list({})).map((e) => [e.id, e.status])).toEqual([
        ['later', 'running'],
        ['early', 'succeeded'],
      ]);
    });

    it('an execution with thousands of events reads them back in order, from any seq', async () => {
      await store.save(execution('many', 1));
      for (let from = 1; from <= 2_500; from += 500)
        await store.appendEvents(Array.from({ length: 500 }, (_v, i) => event('many', from + i)));
      const all = (await store.events('many', 0)).map((e) => e.seq);
      expect(all).toEqual(Array.from({ length: 2_500 }, (_v, i) => i + 1));
      expect((await store.events('many', 2_399)).map((e) => e.seq)).toEqual(all.slice(2_399));
    });

    it('keeps the bodies of a finished execution cut, with their whole size', async () => {
      const given = execution('e1', 1, {
        input: trigger(big(5000)),
        output: 'y'.repeat(3000),
        response: { statusCode: 200, headers: {}, body: [1, 2, 3] },
      });
      const before = JSON.stringify(given);
      await store.save(given);
      expect(JSON.stringify(given)).toBe(before); // the caller's record is not changed
      const kept = (await store.get('e1')) as Execution;
      expect(kept.truncated).toEqual({
        'input.body': JSON.stringify(big(5000)).length,
        output: 3000,
      });
      expect(kept.input.body).toBe(JSON.stringify(big(5000)).slice(0, BODY_MAX));
      expect(kept.output).toBe('y'.repeat(BODY_MAX));
      expect(kept.response?.body).toEqual([1, 2, 3]);
      expect(kept.input.headers).toEqual(given.input.headers);
      const [listed] = await store.list({});
      expect(listed?.truncated).toEqual(kept.truncated);
    });

    it('a cut never splits a character', async () => {
      await store.save(execution('e1', 1, { output: 'é'.repeat(BODY_MAX) }));
      const kept = (await store.get('e1')) as Execution;
      expect(kept.output).toBe('é'.repeat(BODY_MAX / 2));
      expect(kept.truncated).toEqual({ output: 2 * BODY_MAX });
    });

    it('a result event is whole while a caller may still be waiting for it, then cut', async () => {
      await store.save(execution('e1', 1));
      const completed: SequencedEvent = {
        type: 'completed',
        output: big(4000),
        executionId: 'e1',
        seq: 2,
        at: new Date(clock).toISOString(),
      };
      await store.appendEvents([event('e1', 1), completed]);
      expect((await store.events('e1', 0))[1]).toEqual(completed);
      await made.afterHandover();
      const [, cut] = await store.events('e1', 0);
      expect(cut).toMatchObject({
        type: 'completed',
        output: JSON.stringify(big(4000)).slice(0, BODY_MAX),
        truncated: { output: JSON.stringify(big(4000)).length },
      });
    });

    it('pages through everything with a cursor, by count and by bytes', async () => {
      for (let i = 0; i < 12; i++) await store.save(execution(`p${i}`, 30 - i));
      const all = (await store.list({})).map((e) => e.id);
      expect(all).toHaveLength(12);
      const walk = async (filter: { limit?: number; maxBytes?: number }) => {
        const seen: string[][] = [];
        let cursor: string | undefined;
        do {
          const page = await store.page({ ...filter, ...(cursor ? { cursor } : {}) });
          seen.push(page.items.map((e) => e.id));
          cursor = page.next;
        } while (cursor && seen.length < 50);
        return seen;
      };
      const byCount = await walk({ limit: 5 });
      expect(byCount.flat()).toEqual(all);
      expect(byCount.slice(0, 2).map((p) => p.length)).toEqual([5, 5]);
      const one = JSON.stringify(await store.get('p0')).length;
      const byBytes = await walk({ maxBytes: Math.floor(one * 2.5) });
      expect(byBytes.flat()).toEqual(all);
      // Sizes are estimates (the memory store does not serialise): about two a page.
      expect(Math.max(...byBytes.map((p) => p.length))).toBeLessThanOrEqual(2);
      expect(byBytes.length).toBeGreaterThanOrEqual(6);
      // A page always holds one item, however small the budget.
      expect((await store.page({ maxBytes: 1 })).items).toHaveLength(1);
    });

    it('pages through executions created in the same millisecond', async () => {
      for (let i = 0; i < 7; i++) await store.save(execution(`same${i}`, 5));
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await store.page({ limit: 2, ...(cursor ? { cursor } : {}) });
        seen.push(...page.items.map((e) => e.id));
        cursor = page.next;
      } while (cursor);
      expect([...seen].sort()).toEqual(Array.from({ length: 7 }, (_, i) => `same${i}`));
      expect(new Set(seen).size).toBe(7);
    });

    it("applies the caller's access before a page is cut: full pages, each readable execution once, no cursor naming another's", async () => {
      // 12 of team-a, each behind 15 of team-b, every one in a millisecond of its own.
      const readable: string[] = [];
      const others = new Set<string>();
      for (let i = 0; i < 12 * 16; i++) {
        const own = i % 16 === 0;
        const id = own ? `a${i}` : `b${i}`;
        const triggerKey = own ? 'team-a/ingest' : 'team-b/ingest';
        await store.save(execution(id, 200 - i / 10, { triggerKey }));
        if (own) readable.unshift(id);
        else others.add(id);
      }
      // Asynchronous, as the admin API's SubjectAccessReviews are.
      const triggerReadable = (key: string) => Promise.resolve(key.startsWith('team-a/'));
      const pages: Execution[][] = [];
      let cursor: string | undefined;
      do {
        const page = await store.page({ limit: 5, triggerReadable, ...(cursor ? { cursor } : {}) });
        pages.push(page.items);
        cursor = page.next;
        if (!cursor) break;
        // The cursor is the last item shown: its time, and never an id of team-b.
        const at = decodeCursor(cursor);
        const last = page.items.at(-1);
        expect(at?.ms).toBe(Date.parse(last?.createdAt ?? ''));
        expect(others.has(at?.key ?? '')).toBe(false);
      } while (pages.length < 20);
      expect(pages.map((p) => p.length)).toEqual([5, 5, 2]);
      expect(pages.flat().map((e) => e.id)).toEqual(readable);
      // The other filters still apply, with it.
      const failed = await store.page({ triggerReadable, status: 'failed' });
      expect(failed).toEqual({ items: [] });
    });

    it('holds finished executions to its byte budget, dropping the oldest first', async () => {
      const { store: small } = await make({ maxBytes: 40_000 });
      for (let i = 0; i < 60; i++) {
        await small.save(execution(`b${i}`, 60 - i, { output: 'z'.repeat(900) }));
        await small.appendEvents([event(`b${i}`, 1)]);
      }
      const stats = await small.stats();
      expect(stats.bytes).toBeLessThanOrEqual(40_000);
      expect(stats.bytes).toBeGreaterThan(20_000);
      expect(stats.evictions.bytes).toBeGreaterThan(0);
      const ids = (await small.list({ limit: 1000 })).map((e) => e.id);
      expect(ids[0]).toBe('b59');
      expect(ids).not.toContain('b0');
      expect(ids.length).toBe(stats.entries);
      expect(await small.get('b0')).toBeUndefined();
      expect(await small.events('b0', 0)).toEqual([]);
    });

    it('forgets executions older than the TTL', async () => {
      await store.save(execution('e1', 0));
      clock += 25 * HOUR;
      expect(await store.get('e1')).toBeUndefined();
      expect(await store.list({})).toEqual([]);
    });

    it('keeps a dead-lettered execution, with its events, listed, a lifetime and a minute after it was dead-lettered', async () => {
      // Its attempts took 23 hours: created 23 h ago, dead-lettered now. Its dead-letter
      // entry lives a lifetime from now; the record must not go first.
      const deadAt = new Date(clock).toISOString();
      await store.save(execution('dead', 23 * 60, { status: 'running' }));
      await store.appendEvents([event('dead', 1), event('dead', 2)]);
      await store.save(
        execution('dead', 23 * 60, {
          status: 'failed',
          error: { message: 'down' },
          attempt: 3,
          finishedAt: deadAt,
          deadLetteredAt: deadAt,
        }),
      );
      // The same, not dead-lettered: the usual rule.
      await store.save(execution('plain', 23 * 60, { status: 'failed', finishedAt: deadAt }));
      clock += 2 * HOUR; // past its lifetime from creation, and the minute after it ended
      // A later finished save (Redis drops the expired from its index then).
      await store.save(execution('later', 0));
      const listed = async () => (await store.list({ limit: 1000 })).map((e) => e.id);
      expect(await store.get('dead')).toMatchObject({ status: 'failed', deadLetteredAt: deadAt });
      expect((await store.events('dead', 0)).map((e) => e.seq)).toEqual([1, 2]);
      expect(await listed()).toEqual(['later', 'dead']);
      expect(await store.get('plain')).toBeUndefined();
      // Until a lifetime and a minute after it was dead-lettered, then gone.
      clock = Date.parse(deadAt) + 24 * HOUR + FINISHED_GRACE_MS - 1;
      expect((await store.get('dead'))?.id).toBe('dead');
      expect(await listed()).toEqual(['later', 'dead']);
      clock += 2;
      expect(await store.get('dead')).toBeUndefined();
      expect(await listed()).toEqual(['later']);
    });

    it('lists what it reads by id: a queued execution past its lifetime, one finished after it for a minute', async () => {
      await store.save(execution('waiting', 23 * 60, { status: 'queued' }));
      await store.save(execution('ended', 23 * 60 - 1, { status: 'running' }));
      await store.save(execution('recent', 60));
      clock += 2 * HOUR; // both past their lifetime, neither finished
      const endedAt = new Date(clock).toISOString();
      await store.save(execution('ended', 25 * 60 - 1, { finishedAt: endedAt }));
      const listed = async () => (await store.list({ limit: 1000 })).map((e) => e.id);
      const read = async (id: string) => (await store.get(id)) !== undefined;
      const kept = made.keepsUnfinished;
      expect(await read('waiting')).toBe(kept);
      expect(await read('ended')).toBe(kept);
      expect(await listed()).toEqual(kept ? ['recent', 'ended', 'waiting'] : ['recent']);
      // Pages and filters see them too.
      if (kept) {
        expect((await store.page({ limit: 2 })).items.map((e) => e.id)).toEqual([
          'recent',
          'ended',
        ]);
        expect((await store.list({ status: 'queued' })).map((e) => e.id)).toEqual(['waiting']);
      }
      // The finished one goes a minute after it ended; the queued one stays.
      clock += FINISHED_GRACE_MS + 1;
      expect(await read('ended')).toBe(false);
      expect(await read('waiting')).toBe(kept);
      expect(await listed()).toEqual(kept ? ['recent', 'waiting'] : ['recent']);
    });

    /** A dead-lettered execution, with two events, as a worker writes it. */
    async function deadLettered(
      into: ExecutionStore,
      id: string,
      createdMinutesAgo: number,
      deadLetteredMinutesAgo: number,
      extra: Partial<Execution> = {},
    ): Promise<Execution> {
      const at = new Date(clock - deadLetteredMinutesAgo * 60_000).toISOString();
      await into.save(execution(id, createdMinutesAgo, { status: 'running' }));
      await into.appendEvents([event(id, 1), event(id, 2)]);
      const dead = execution(id, createdMinutesAgo, {
        status: 'failed',
        error: { message: 'down' },
        attempt: 3,
        finishedAt: at,
        deadLetteredAt: at,
        ...extra,
      });
      await into.save(dead);
      return dead;
    }

    /** `n` finished executions of ~1.2 KB, created `minutesAgo` (and a little after). */
    async function fill(into: ExecutionStore, prefix: string, n: number, minutesAgo: number) {
      for (let i = 0; i < n; i++) {
        await into.save(
          execution(`${prefix}${i}`, minutesAgo - i / 1000, { output: 'z'.repeat(900) }),
        );
        await into.appendEvents([event(`${prefix}${i}`, 1)]);
      }
    }

    it('never drops for room the record of a listed dead letter: the other executions make it', async () => {
      const { store: small, deadLetters } = await make({ maxBytes: 40_000 });
      const list = deadLetters();
      // Dead-lettered 50 minutes ago: it expires before any of the executions below,
      // which a full budget drops first otherwise.
      const dead = await deadLettered(small, 'dead', 60, 50);
      await list.add(deadLetterOf(dead));
      const held = await small.heldBytes();
      // Saved again once held (its callback's outcome): still held, at its new size.
      await small.save({
        ...dead,
        error: { message: 'down '.repeat(60) },
        callback: { delivered: false, attempts: 5 },
      });
      expect(await small.heldBytes()).toBeGreaterThan(held + 200);
      await fill(small, 'b', 150, 40);
      const stats = await small.stats();
      expect(stats.evictions.bytes).toBeGreaterThan(0);
      // (Redis counts the last events, appended after their record, without a sweep.)
      expect(stats.bytes).toBeLessThanOrEqual(40_000 + 200);
      expect(await small.get('b0')).toBeUndefined();
      expect(await small.get('dead')).toMatchObject({
        status: 'failed',
        deadLetteredAt: dead.deadLetteredAt,
        callback: { attempts: 5 },
      });
      expect((await small.events('dead', 0)).map((e) => e.seq)).toEqual([1, 2]);
      expect((await small.list({ limit: 1000, status: 'failed' })).map((e) => e.id)).toEqual([
        'dead',
      ]);
      expect(await small.heldBytes()).toBeGreaterThan(0);
      expect((await list.stats()).bytes).toBe(await small.heldBytes());
    });

    it('holds dead letters in at most half of its budget: past it the oldest entries go, then their records', async () => {
      const {
        store: small,
        deadLetters,
        sameShard,
      } = await make({ maxBytes: 40_000 * made.shards });
      const dropped: [string[], string][] = [];
      const list = deadLetters({ onDropped: (ids, reason) => dropped.push([ids, reason]) });
      // On one shard (each holds 40,000 bytes): 40 dead letters of ~1.2 KB, oldest first.
      const ids = sameShard('d', 40);
      for (const [i, id] of ids.entries()) {
        const dead = await deadLettered(small, id, 60, 50 - i / 10, { output: 'y'.repeat(900) });
        expect(await list.add(deadLetterOf(dead))).toBe(true);
      }
      const listed = (await list.list({ limit: 1000 })).map((e) => e.executionId);
      // Newest first; what is listed can be read, with its events; the rest went.
      expect(listed.length).toBeLessThan(40);
      expect(listed.length).toBeGreaterThanOrEqual(5);
      expect(listed).toEqual(ids.slice(40 - listed.length).reverse());
      for (const id of listed) {
        expect((await small.get(id))?.id).toBe(id);
        expect(await small.events(id, 0)).toHaveLength(2);
      }
      for (const id of ids.slice(0, 40 - listed.length))
        expect(await small.get(id)).toBeUndefined();
      expect(await small.heldBytes()).toBeLessThanOrEqual(20_000);
      expect(await small.heldBytes()).toBeGreaterThan(15_000);
      // Said, and counted: the dead-letter list's own evictions.
      expect(dropped.flatMap(([d]) => d)).toEqual(ids.slice(0, 40 - listed.length));
      expect(new Set(dropped.map(([, reason]) => reason))).toEqual(new Set(['bytes']));
      expect((await list.stats()).evictions.bytes).toBe(40 - listed.length);
      expect((await list.stats()).entries).toBe(listed.length);
    });

    it('a retried entry releases its record (dropped for room again, as others); one put back is held again', async () => {
      const { store: small, deadLetters } = await make({ maxBytes: 40_000 });
      const list = deadLetters();
      const dead = await deadLettered(small, 'dead', 60, 50);
      await list.add(deadLetterOf(dead));
      // A retry that cannot start puts its entry back: held again.
      const taken = await list.take('dead');
      expect(await list.add(taken?.entry as DeadLetter)).toBe(true);
      await fill(small, 'b', 150, 40);
      expect(await small.get('dead')).toBeDefined();
      expect(await list.get('dead')).toBeDefined();
      // A retry that started: the record is an ordinary finished one (the first to
      // expire), which a full budget drops.
      const retried = await list.take('dead');
      expect(retried?.entry.executionId).toBe('dead');
      await list.release(retried as TakenDeadLetter);
      expect(await small.heldBytes()).toBe(0);
      await fill(small, 'c', 150, 30);
      expect(await small.get('dead')).toBeUndefined();
    });

    it('a retry that cannot start puts its entry back with its record, however full the store got meanwhile', async () => {
      const { store: small, deadLetters } = await make({ maxBytes: 40_000 });
      const list = deadLetters();
      const dead = await deadLettered(small, 'dead', 60, 50);
      await list.add(deadLetterOf(dead));
      const taken = await list.take('dead');
      // While its retry tries to start (and fails: a full queue), executions finish and
      // fill the budget: the record of the entry taken is not theirs to drop.
      await fill(small, 'b', 150, 40);
      expect(await list.add(taken?.entry as DeadLetter)).toBe(true);
      expect(await list.get('dead')).toBeDefined();
      expect(await small.get('dead')).toBeDefined();
    });

    it("an entry dropped for the list's cap releases its record", async () => {
      const { store: small, deadLetters } = await make({ maxBytes: 40_000 });
      const dropped: string[] = [];
      const list = deadLetters({ maxEntries: 1, onDropped: (ids) => dropped.push(...ids) });
      await list.add(deadLetterOf(await deadLettered(small, 'first', 60, 50)));
      await list.add(deadLetterOf(await deadLettered(small, 'second', 60, 49)));
      expect((await list.list({})).map((e) => e.executionId)).toEqual(['second']);
      expect(dropped).toEqual(['first']);
      expect((await list.stats()).evictions.count).toBe(1);
      await fill(small, 'b', 150, 40);
      expect(await small.get('first')).toBeUndefined();
      expect(await small.get('second')).toBeDefined();
    });

    /**
     * The store's HeldRecords, but the next hold of an id `pause`d waits, once done,
     * until its `go()`; with `pause(id, 'listed')`, the next `listed` of it waits before
     * it is made (its entry written, not yet said listed). Another add (or a retry) runs
     * meanwhile, as it may on another worker, or in this one between two awaits.
     */
    function pausingHolds(records: HeldRecords) {
      type Step = 'hold' | 'listed';
      const paused = new Map<string, { gate: Promise<void>; reached: () => void }>();
      const wait = async (step: Step, id: string) => {
        const pause = paused.get(`${step} ${id}`);
        if (!pause) return;
        paused.delete(`${step} ${id}`);
        pause.reached();
        await pause.gate;
      };
      const hold = async (id: string) => {
        const result = await records.hold(id);
        await wait('hold', id);
        return result;
      };
      const listed = async (id: string, number: number, beyond: HeldRecord[]) => {
        await wait('listed', id);
        return records.listed(id, number, beyond);
      };
      const wrapped = new Proxy(records, {
        get(target, name) {
          if (name === 'hold') return hold;
          if (name === 'listed') return listed;
          const value: unknown = Reflect.get(target, name);
          return typeof value === 'function' ? (value as () => unknown).bind(target) : value;
        },
      });
      const pause = (id: string, step: Step = 'hold') => {
        const gate = Promise.withResolvers<void>();
        const reached = Promise.withResolvers<void>();
        paused.set(`${step} ${id}`, { gate: gate.promise, reached: reached.resolve });
        return { reached: reached.promise, go: gate.resolve };
      };
      return { records: wrapped, pause };
    }

    /** Every entry listed can be read (its record is there); the ids listed. */
    async function everyListedReadable(list: DeadLetterStore, into: ExecutionStore) {
      const listed = (await list.list({ limit: 1000 })).map((e) => e.executionId);
      const unreadable: string[] = [];
      for (const id of listed) if (!(await into.get(id))) unreadable.push(id);
      expect(unreadable).toEqual([]);
      return listed;
    }

    /** Dead letters of ~1.8 KB on one shard, the first the oldest (11 fill the hold). */
    async function fillHold(into: ExecutionStore, list: DeadLetterStore, ids: string[]) {
      for (const [i, id] of ids.entries()) {
        const dead = await deadLettered(into, id, 60, 50 - i / 10, { output: 'y'.repeat(900) });
        expect(await list.add(deadLetterOf(dead))).toBe(true);
      }
    }

    it("past the hold's bound, a dead letter still being added is not dropped for another added meanwhile", async () => {
      const { store: small, sameShard } = await make({ maxBytes: 40_000 * made.shards });
      const ids = sameShard('d', 22);
      const [slow, fast] = ids.slice(20) as [string, string];
      const holds = pausingHolds(small);
      const list = made.deadLetters({ records: holds.records });
      await fillHold(small, list, ids.slice(0, 20));
      // The oldest of all is held, and waits before its entry is written while the
      // newest is added: the first held record beyond the bound is the slow one's.
      const slowDead = await deadLettered(small, slow, 60, 55, { output: 'y'.repeat(900) });
      const fastDead = await deadLettered(small, fast, 60, 1, { output: 'y'.repeat(900) });
      const paused = holds.pause(slow);
      const adding = list.add(deadLetterOf(slowDead));
      await paused.reached;
      expect(await list.add(deadLetterOf(fastDead))).toBe(true);
      paused.go();
      expect(await adding).toBe(true);
      const listed = await everyListedReadable(list, small);
      expect(listed).toContain(slow);
      expect(listed).toContain(fast);
    });

    it("past the hold's bound, a retried entry put back while another add drops its record keeps it", async () => {
      const { store: small, sameShard } = await make({ maxBytes: 40_000 * made.shards });
      const ids = sameShard('d', 10);
      const [retried, fast] = [ids[0] as string, ids[9] as string];
      const holds = pausingHolds(small);
      const list = made.deadLetters({ records: holds.records });
      // 9 (~16 KB): within the bound, all listed.
      await fillHold(small, list, ids.slice(0, 9));
      expect(await list.count()).toBe(9);
      // Its retry takes the oldest entry. A new dead letter's hold names that record
      // beyond the bound; the retry cannot start and puts the entry back (held again)
      // before that add has taken the entries out and dropped their records.
      const taken = await list.take(retried);
      expect(taken?.entry.executionId).toBe(retried);
      // (Larger than the others: the hold is past its bound with it.)
      const fastDead = await deadLettered(small, fast, 60, 1, {
        error: { message: 'down '.repeat(1200) },
      });
      const fastPaused = holds.pause(fast);
      const adding = list.add(deadLetterOf(fastDead));
      await fastPaused.reached;
      const backPaused = holds.pause(retried);
      const back = list.add(taken?.entry as DeadLetter);
      await backPaused.reached;
      fastPaused.go();
      expect(await adding).toBe(true);
      backPaused.go();
      expect(await back).toBe(true);
      const listed = await everyListedReadable(list, small);
      expect(listed).toContain(retried);
    });

    it("past the hold's bound, an entry put back (listed) before the add that named its record writes stays listed", async () => {
      const { store: small, sameShard } = await make({ maxBytes: 40_000 * made.shards });
      const ids = sameShard('d', 10);
      const [retried, fast] = [ids[0] as string, ids[9] as string];
      const dropped: string[] = [];
      const holds = pausingHolds(small);
      const list = made.deadLetters({
        records: holds.records,
        onDropped: (gone) => dropped.push(...gone),
      });
      await fillHold(small, list, ids.slice(0, 9));
      const taken = await list.take(retried);
      const fastDead = await deadLettered(small, fast, 60, 1, {
        error: { message: 'down '.repeat(1200) },
      });
      // The new dead letter's hold names the retried record beyond the bound; before it
      // writes, the retry that could not start puts its entry back, all of it.
      const fastPaused = holds.pause(fast);
      const adding = list.add(deadLetterOf(fastDead));
      await fastPaused.reached;
      expect(await list.add(taken?.entry as DeadLetter)).toBe(true);
      fastPaused.go();
      expect(await adding).toBe(true);
      // Listed with its record, or dropped and said so: never gone unsaid.
      const listed = await everyListedReadable(list, small);
      if (!listed.includes(retried)) expect(dropped).toContain(retried);
      expect(listed).toContain(retried);
    });

    it("past the hold's bound, an entry two adds wrote, the earlier hold last, goes with its record", async () => {
      const { store: small, sameShard } = await make({ maxBytes: 40_000 * made.shards });
      const ids = sameShard('d', 22);
      const twice = ids[0] as string;
      const dropped: string[] = [];
      const holds = pausingHolds(small);
      const list = made.deadLetters({
        records: holds.records,
        onDropped: (gone) => dropped.push(...gone),
      });
      const dead = await deadLettered(small, twice, 60, 50, { output: 'y'.repeat(900) });
      // Two workers add its entry at once (a job taken over): the first to hold writes last.
      const paused = holds.pause(twice);
      const first = list.add(deadLetterOf(dead));
      await paused.reached;
      expect(await list.add(deadLetterOf(dead))).toBe(true);
      paused.go();
      expect(await first).toBe(true);
      // Newer dead letters fill the hold: the bound names it, the oldest.
      await fillHold(small, list, ids.slice(1));
      const listed = await everyListedReadable(list, small);
      expect(listed).not.toContain(twice);
      expect(dropped).toContain(twice);
    });

    it('a retry that takes an entry whose add has yet to say it listed releases its record all the same', async () => {
      const { store: small } = await make({ maxBytes: 40_000 });
      const holds = pausingHolds(small);
      const list = made.deadLetters({ records: holds.records });
      const dead = await deadLettered(small, 'dead', 60, 50);
      // A worker adds the entry, and is slow to say so (LISTED) once written.
      const paused = holds.pause('dead', 'listed');
      const adding = list.add(deadLetterOf(dead));
      await paused.reached;
      // Meanwhile its retry takes the entry, starts, and releases the record.
      const taken = await list.take('dead');
      expect(taken?.entry.executionId).toBe('dead');
      await list.release(taken as TakenDeadLetter);
      paused.go();
      expect(await adding).toBe(true);
      // Nothing listed: the record is an ordinary finished one, which a full budget drops.
      expect(await list.count()).toBe(0);
      expect(await small.heldBytes()).toBe(0);
      await fill(small, 'b', 150, 40);
      expect(await small.get('dead')).toBeUndefined();
    });

    it("an entry dropped for the list's cap while its add has yet to say it listed releases its record", async () => {
      const { store: small } = await make({ maxBytes: 40_000 });
      const holds = pausingHolds(small);
      const list = made.deadLetters({ records: holds.records, maxEntries: 1 });
      const first = await deadLettered(small, 'first', 60, 50);
      const second = await deadLettered(small, 'second', 60, 49);
      const paused = holds.pause('first', 'listed');
      const adding = list.add(deadLetterOf(first));
      await paused.reached;
      expect(await list.add(deadLetterOf(second))).toBe(true);
      paused.go();
      expect(await adding).toBe(true);
      expect((await list.list({})).map((e) => e.executionId)).toEqual(['second']);
      await fill(small, 'b', 150, 40);
      expect(await small.get('first')).toBeUndefined();
      expect(await small.get('second')).toBeDefined();
    });

    it('an entry added again, and said listed, before the release of its earlier retry keeps its record held', async () => {
      const { store: small, deadLetters } = await make({ maxBytes: 40_000 });
      const list = deadLetters();
      const dead = await deadLettered(small, 'dead', 60, 50);
      await list.add(deadLetterOf(dead));
      // Its retry takes the entry; a worker taking over the job adds it again, all of it
      // (ADR 0018's known gap), before the retry, started, releases the record.
      const taken = await list.take('dead');
      expect(await list.add(deadLetterOf(dead))).toBe(true);
      await list.release(taken as TakenDeadLetter);
      await fill(small, 'b', 150, 40);
      expect(await everyListedReadable(list, small)).toEqual(['dead']);
    });

    /** A dead letter of ~6 KB, dead-lettered a minute ago: with 9 of fillHold's, past the hold's bound. */
    const large = (into: ExecutionStore, id: string) =>
      deadLettered(into, id, 60, 1, { error: { message: 'down '.repeat(1200) } });

    it("past the hold's bound, a held record whose entry had left (its retry died before the release) goes uncounted by the list", async () => {
      const {
        store: small,
        deadLetters,
        sameShard,
      } = await make({ maxBytes: 40_000 * made.shards });
      const ids = sameShard('d', 10);
      const [orphan, fast] = [ids[0] as string, ids[9] as string];
      const dropped: string[] = [];
      const list = deadLetters({ onDropped: (gone) => dropped.push(...gone) });
      await fillHold(small, list, ids.slice(0, 9));
      // Its retry took the entry and started; the process died before the release: the
      // record is held without an entry.
      expect(await list.take(orphan)).toBeDefined();
      const fastDead = await large(small, fast);
      const before = (await small.stats()).evictions.bytes;
      expect(await list.add(deadLetterOf(fastDead))).toBe(true);
      // The bound named it, the oldest held, and the store dropped it for room ...
      expect(await small.get(orphan)).toBeUndefined();
      const records = (await small.stats()).evictions.bytes - before;
      expect(records).toBeGreaterThan(1);
      // ... but the list lost no entry of it: what it says and counts are the entries it
      // took out, whose records went with them.
      expect(dropped).not.toContain(orphan);
      expect(dropped).toHaveLength(records - 1);
      expect((await list.stats()).evictions.bytes).toBe(dropped.length);
      for (const id of dropped) expect(await small.get(id)).toBeUndefined();
      await everyListedReadable(list, small);
    });

    it("past the hold's bound, a held record that has expired goes as expired, not for room, and its entry as expired", async () => {
      const {
        store: small,
        deadLetters,
        sameShard,
      } = await make({ maxBytes: 40_000 * made.shards });
      const ids = sameShard('d', 10);
      const [old, fast] = [ids[0] as string, ids[9] as string];
      const dropped: string[] = [];
      const list = deadLetters({ onDropped: (gone) => dropped.push(...gone) });
      // Dead-lettered five minutes before the others: its entry and record expire first.
      const oldDead = await deadLettered(small, old, 60, 55, { output: 'y'.repeat(900) });
      expect(await list.add(deadLetterOf(oldDead))).toBe(true);
      await fillHold(small, list, ids.slice(1, 9));
      const fastDead = await large(small, fast);
      // A lifetime and a minute after its dead-lettering, and nothing swept since: its
      // record is past its time (the others' entries are not).
      clock += 24 * HOUR - 54 * 60_000 + 1_000;
      const before = (await small.stats()).evictions.bytes;
      expect(await list.add(deadLetterOf(fastDead))).toBe(true);
      expect(await small.get(old)).toBeUndefined();
      // The bound named it with the next oldest: only that one went for room.
      const records = (await small.stats()).evictions.bytes - before;
      expect(records).toBeGreaterThan(0);
      expect(dropped).not.toContain(old);
      expect(dropped).toHaveLength(records);
      const { evictions } = await list.stats();
      expect(evictions.bytes).toBe(dropped.length);
      expect(evictions.expired).toBeGreaterThan(0);
      // Gone from the hold all the same: it is within its bound.
      expect(await small.heldBytes()).toBeLessThanOrEqual(20_000);
      await everyListedReadable(list, small);
    });

    it('a take of an expired entry takes nothing and counts it as expired', async () => {
      const list = made.deadLetters();
      await list.add(deadLetterOf(await deadLettered(store, 'late', 60, 50)));
      clock += 24 * HOUR;
      expect(await list.take('late')).toBeUndefined();
      expect((await list.stats()).evictions.expired).toBe(1);
      expect(await list.take('late')).toBeUndefined();
      expect((await list.stats()).evictions.expired).toBe(1);
    });

    it('an entry added again while its retry starts keeps its record held: the release leaves it', async () => {
      const { store: small } = await make({ maxBytes: 40_000 });
      const holds = pausingHolds(small);
      const list = made.deadLetters({ records: holds.records });
      const dead = await deadLettered(small, 'dead', 60, 50);
      await list.add(deadLetterOf(dead));
      // Its retry takes the entry; a worker taking over the job adds it again (ADR 0018's
      // known gap) and has held the record when the retry, started, releases it.
      const taken = await list.take('dead');
      expect(taken).toBeDefined();
      const paused = holds.pause('dead');
      const again = list.add(deadLetterOf(dead));
      await paused.reached;
      await list.release(taken as TakenDeadLetter);
      paused.go();
      expect(await again).toBe(true);
      await fill(small, 'b', 150, 40);
      expect(await everyListedReadable(list, small)).toEqual(['dead']);
    });

    it('discard removes a succeeded execution: not read, not listed, its events gone after the handover time', async () => {
      const completed = (id: string, seq: number): SequencedEvent => ({
        type: 'completed',
        output: { ok: true },
        executionId: id,
        seq,
        at: new Date(clock).toISOString(),
      });
      await store.save(execution('kept', 2));
      await store.save(execution('gone', 1, { status: 'queued' }));
      await store.appendEvents([event('gone', 1)]);
      await store.save(execution('gone', 1, { status: 'running' }));
      await store.discard(execution('gone', 1, { output: { ok: true } }), [completed('gone', 2)]);
      expect(await store.get('gone')).toBeUndefined();
      expect((await store.list({})).map((e) => e.id)).toEqual(['kept']);
      expect(await store.get('kept')).toMatchObject({ status: 'succeeded' });
      // Nobody watches it: nothing of it is left, not even for the handover time.
      expect(await store.events('gone', 0)).toEqual([]);
      await made.afterHandover();
      expect(await store.events('gone', 0)).toEqual([]);
      // Discarded twice (a job run again): nothing happens, nothing fails.
      await store.discard(execution('gone', 1, { output: { ok: true } }), [completed('gone', 2)]);
      expect(await store.get('gone')).toBeUndefined();
    });

    it('discard of a record saved finished before (its callback delivered) gives its bytes back', async () => {
      await store.save(execution('other', 2));
      await eventually(async () => expect((await store.stats()).entries).toBe(1));
      const before = (await store.stats()).bytes;
      const done = execution('called', 1, { output: { ok: true } });
      await store.save(done);
      await eventually(async () => expect((await store.stats()).entries).toBe(2));
      expect((await store.stats()).bytes).toBeGreaterThan(before);
      await store.discard(
        { ...done, callback: { delivered: true, attempts: 1, status: 200 } },
        [],
        { finished: true },
      );
      expect(await store.get('called')).toBeUndefined();
      expect(await store.stats()).toMatchObject({ bytes: before, entries: 1 });
      expect((await store.list({})).map((e) => e.id)).toEqual(['other']);
    });

    it('discard with a tombstone (an Idempotency-Key came with it): the id reads as discarded for the window, never as a record; one without leaves none', async () => {
      const finishedAt = new Date(clock).toISOString();
      const completed = (id: string): SequencedEvent => ({
        type: 'completed',
        output: { ok: true },
        executionId: id,
        seq: 2,
        at: finishedAt,
      });
      await store.save(execution('kept', 3));
      for (const id of ['keyed', 'plain']) {
        await store.save(execution(id, 1, { status: 'running' }));
        await store.appendEvents([event(id, 1)]);
      }
      const done = (id: string) => execution(id, 1, { output: { ok: true }, finishedAt });
      await store.discard(done('keyed'), [completed('keyed')], { tombstoneMs: HANDOVER_MS });
      await store.discard(done('plain'), [completed('plain')]);
      expect(await store.discarded('keyed')).toEqual({ status: 'succeeded', finishedAt });
      for (const id of ['plain', 'kept', 'nope']) expect(await store.discarded(id)).toBeUndefined();
      // Not a record: not read, not listed, no events.
      expect(await store.get('keyed')).toBeUndefined();
      expect((await store.list({})).map((e) => e.id)).toEqual(['kept']);
      expect((await store.page({ limit: 10 })).items.map((e) => e.id)).toEqual(['kept']);
      expect(await store.events('keyed', 0)).toEqual([]);
      // A watched one keeps its events for the handover time, and leaves its tombstone too.
      await store.save(execution('both', 1, { status: 'running' }));
      await store.appendEvents([event('both', 1)]);
      if ('watchEvents' in store) await (store as RedisExecutionStore).watchEvents('both', 0);
      await store.discard(done('both'), [completed('both')], {
        watched: true,
        tombstoneMs: 60 * HOUR,
      });
      expect((await store.events('both', 0)).map((e) => e.type)).toEqual(['queued', 'completed']);
      expect(await store.discarded('both')).toEqual({ status: 'succeeded', finishedAt });
      // The window is over: nothing left of the first; the second's is longer.
      await made.afterHandover();
      expect(await store.discarded('keyed')).toBeUndefined();
      expect(await store.events('both', 0)).toEqual([]);
      expect(await store.discarded('both')).toEqual({ status: 'succeeded', finishedAt });
      expect(await store.get('both')).toBeUndefined();
    });

    it('lists no entry for a record it does not have, or that is not a finished dead letter', async () => {
      const list = made.deadLetters();
      const gone = deadLetterOf(
        execution('gone', 1, { status: 'failed', deadLetteredAt: new Date(clock).toISOString() }),
      );
      expect(await list.add(gone)).toBe(false);
      await store.save(execution('plain', 1, { status: 'failed' }));
      expect(await list.add({ ...gone, executionId: 'plain' })).toBe(false);
      await store.save(execution('running', 1, { status: 'running' }));
      expect(await list.add({ ...gone, executionId: 'running' })).toBe(false);
      expect(await list.count()).toBe(0);
      expect(await store.hold('gone')).toEqual({ held: false, hold: 0, beyond: [] });
    });
  });
}

contract('MemoryExecutionStore', (options = {}) => {
  const store = new MemoryExecutionStore({
    now,
    maxBodyBytes: BODY_MAX,
    handoverMs: HANDOVER_MS,
    ...options,
  });
  return Promise.resolve({
    store,
    deadLetters: (dl: DeadLetterStoreOptions = {}) =>
      new MemoryDeadLetterStore({ now, records: store, ...dl }),
    sameShard: (prefix: string, n: number) => Array.from({ length: n }, (_v, i) => `${prefix}${i}`),
    shards: 1,
    afterHandover: () => {
      clock += HANDOVER_MS + 1;
      return Promise.resolve();
    },
    keepsUnfinished: false,
  });
});

describe('MemoryExecutionStore: tombstones', () => {
  it('count in the byte budget, are held to maxTombstones (the oldest go), and go once their window is over', async () => {
    // Fewer executions than tombstones: the tombstones have their own bound.
    const store = new MemoryExecutionStore({ now, maxExecutions: 1, maxTombstones: 3 });
    const at = new Date(clock).toISOString();
    for (const id of ['t0', 't1', 't2', 't3']) {
      await store.save(execution(id, 1, { status: 'running' }));
      await store.discard(execution(id, 1, { finishedAt: at }), [], { tombstoneMs: HOUR });
    }
    expect(store.size).toBe(0);
    const { bytes, evictions } = store.stats();
    expect(bytes).toBeGreaterThan(3 * 64);
    expect(bytes).toBeLessThan(3 * 200);
    expect(evictions.count).toBe(1);
    expect(await store.discarded('t0')).toBeUndefined();
    expect(await store.discarded('t3')).toEqual({ status: 'succeeded', finishedAt: at });
    clock += HOUR;
    await store.save(execution('later', 0));
    expect(await store.discarded('t3')).toBeUndefined();
    const alone = new MemoryExecutionStore({ now });
    await alone.save(execution('later', 0));
    expect(store.stats().bytes).toBe(alone.stats().bytes);
  });

  it('by default outnumber the executions kept, as many as the memory idempotency store has keys', async () => {
    expect(DEFAULT_MAX_TOMBSTONES).toBe(DEFAULT_IDEMPOTENCY_KEYS);
    const store = new MemoryExecutionStore({ now, maxExecutions: 2 });
    const at = new Date(clock).toISOString();
    const ids = ['d0', 'd1', 'd2', 'd3', 'd4'];
    for (const id of ids) {
      await store.save(execution(id, 1, { status: 'running' }));
      await store.discard(execution(id, 1, { finishedAt: at }), [], { tombstoneMs: HOUR });
    }
    for (const id of ids)
      expect(await store.discarded(id)).toEqual({ status: 'succeeded', finishedAt: at });
    expect(store.stats().evictions.count).toBe(0);
  });

  it('take at most half the byte budget (the oldest go): they never push the records out', async () => {
    const store = new MemoryExecutionStore({ now, maxBytes: 4096 });
    const at = new Date(clock).toISOString();
    await store.save(execution('kept', 3, { status: 'failed', finishedAt: at }));
    const ids = Array.from(
      { length: 100 },
      (_v, i) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
    );
    for (const id of ids) {
      await store.save(execution(id, 1, { status: 'running' }));
      await store.discard(execution(id, 1, { finishedAt: at }), [], { tombstoneMs: HOUR });
    }
    await store.save(execution('later', 0));
    // The records stay: the tombstones made room among themselves.
    expect((await store.get('kept'))?.status).toBe('failed');
    expect(await store.get('later')).toBeDefined();
    const { bytes, evictions } = store.stats();
    expect(bytes).toBeLessThanOrEqual(4096);
    expect(evictions.bytes).toBeGreaterThan(0);
    expect(await store.discarded(ids[0] as string)).toBeUndefined();
    expect(await store.discarded(ids.at(-1) as string)).toEqual({
      status: 'succeeded',
      finishedAt: at,
    });
  });
});

describe('MemoryExecutionStore: discard of a watched execution', () => {
  it('keeps its events, without the record, for the handover time (a gateway that listens just now)', async () => {
    const store = new MemoryExecutionStore({
      now,
      maxBodyBytes: BODY_MAX,
      handoverMs: HANDOVER_MS,
    });
    const completed: SequencedEvent = {
      type: 'completed',
      output: { ok: true },
      executionId: 'w',
      seq: 2,
      at: new Date(clock).toISOString(),
    };
    await store.save(execution('w', 1, { status: 'running' }));
    await store.appendEvents([event('w', 1)]);
    await store.discard(execution('w', 1), [completed], { watched: true });
    expect(await store.get('w')).toBeUndefined();
    expect((await store.events('w', 0)).map((e) => e.seq)).toEqual([1, 2]);
    clock += HANDOVER_MS + 1;
    expect(await store.events('w', 0)).toEqual([]);
  });
});

// One Redis with one shard (today's names), one Redis with three shards (listings merge
// three indexes, the budget is split three ways), and a cluster of three masters with
// six shards (every script in one slot).
for (const [name, start, shards] of [
  ['one Redis', singleRedis, 1],
  ['one Redis, 3 shards', singleRedis, 3],
  ['a Redis Cluster of 3 masters, 6 shards', redisCluster, 6],
] as const) {
  describe.skipIf(!redisAvailable())(`RedisExecutionStore on ${name}`, () => {
    let backend: RedisBackend;
    let layout: ExecutionLayout;
    beforeAll(async () => {
      backend = await start();
      layout = new ExecutionLayout({ shards, cluster: backend.client.isCluster });
    }, 60_000);
    afterAll(async () => {
      await backend?.stop();
    });
    const redisStore = (options: Partial<RedisExecutionStoreOptions> = {}) =>
      new RedisExecutionStore({
        redis: backend.client,
        layout,
        maxBodyBytes: BODY_MAX,
        ...options,
      });

    // Redis expires keys on its own clock: the store's clock drives the TTL it sets and
    // its reads, so a store built with a clock 25 h later reads the index as expired.
    contract('contract', async (options = {}) => {
      await backend.flushall();
      const store = redisStore({ now, handoverMs: HANDOVER_MS, ...options });
      return {
        store,
        deadLetters: (dl: DeadLetterStoreOptions = {}) =>
          new RedisDeadLetterStore({ redis: backend.client, layout, now, records: store, ...dl }),
        sameShard: (prefix: string, n: number) => {
          const ids: string[] = [];
          for (let i = 0; ids.length < n; i++)
            if (layout.shardOf(`${prefix}${i}`) === 0) ids.push(`${prefix}${i}`);
          return ids;
        },
        shards,
        afterHandover: () => sleep(HANDOVER_MS + 50),
        keepsUnfinished: true,
      };
    });

    it('every key it writes expires, and is named in the layout', async () => {
      await backend.flushall();
      const store = redisStore();
      const created = new Date().toISOString();
      for (const id of ['k1', 'k2', 'k3', 'k4']) {
        const e: Execution = { ...execution(id, 0), createdAt: created };
        await store.save({ ...e, status: 'queued' });
        await store.appendEvents([{ ...event(id, 1), at: created }]);
        await store.save({ ...e, output: big(5000) });
        await store.appendEvents([
          { type: 'completed', output: big(5000), executionId: id, seq: 2, at: created },
        ]);
      }
      // A discarded success that came with an Idempotency-Key: its tombstone, in its slot.
      await store.save({ ...execution('k5', 0), createdAt: created, status: 'running' });
      await store.discard({ ...execution('k5', 0), createdAt: created }, [], { tombstoneMs: HOUR });
      const keys = await backend.keys();
      expect(keys).toContain(layout.of('k5').tombstone('k5'));
      expect(keys).not.toContain(layout.of('k5').execution('k5'));
      expect(await backend.client.pttl(layout.of('k5').tombstone('k5'))).toBeLessThanOrEqual(HOUR);
      expect(keys.length).toBeGreaterThanOrEqual(7);
      for (const key of keys) {
        expect([key, await backend.client.pttl(key)]).toEqual([key, expect.any(Number)]);
        expect(await backend.client.pttl(key)).toBeGreaterThan(0);
        const tag = /^hookgate:\{s(\d+)\}:/.exec(key)?.[1];
        if (layout.tagged) expect(Number(tag)).toBeLessThan(shards);
        else expect(tag).toBeUndefined();
      }
    });

    it('a dead-lettered execution expires a lifetime and a minute after its finishing write, however old it is', async () => {
      await backend.flushall();
      const store = redisStore({ ttlMs: 10_000 });
      // Created 9 s ago: a second of its lifetime is left when it ends.
      const createdAt = new Date(Date.now() - 9_000).toISOString();
      const at = new Date().toISOString();
      for (const id of ['dead', 'plain']) {
        await store.save({ ...execution(id, 0), createdAt, status: 'running' });
        await store.save({
          ...execution(id, 0),
          createdAt,
          status: 'failed',
          finishedAt: at,
          ...(id === 'dead' ? { deadLetteredAt: at } : {}),
        });
      }
      const pttl = (id: string) => backend.client.pttl(layout.of(id).execution(id));
      expect(await pttl('dead')).toBeGreaterThan(FINISHED_GRACE_MS + 5_000);
      expect(await pttl('dead')).toBeLessThanOrEqual(10_000 + FINISHED_GRACE_MS);
      // Not dead-lettered: what is left of its lifetime, at least the minute.
      expect(await pttl('plain')).toBeLessThanOrEqual(FINISHED_GRACE_MS);
      expect(await pttl('plain')).toBeGreaterThan(FINISHED_GRACE_MS - 5_000);
    });

    it('the keys of the hold expire, as the others do', async () => {
      await backend.flushall();
      const store = redisStore();
      const list = new RedisDeadLetterStore({ redis: backend.client, layout, records: store });
      const at = new Date().toISOString();
      const dead = { ...execution('held', 0), createdAt: at, status: 'failed' as const };
      await store.save({ ...dead, status: 'running' });
      await store.save({ ...dead, finishedAt: at, deadLetteredAt: at });
      expect(await list.add(deadLetterOf({ ...dead, deadLetteredAt: at }))).toBe(true);
      const keys = layout.of('held');
      for (const key of [keys.held, keys.heldBytes])
        expect([key, await backend.client.pttl(key)]).toEqual([key, expect.any(Number)]);
      expect(await backend.client.pttl(keys.held)).toBeGreaterThan(0);
      expect(await backend.client.pttl(keys.heldBytes)).toBeGreaterThan(0);
      // Released into a finished set that had gone: it gets its expiry.
      await backend.client.del(keys.finished);
      await list.release((await list.take('held')) as TakenDeadLetter);
      expect(await backend.client.zscore(keys.finished, 'held')).not.toBeNull();
      expect(await backend.client.pttl(keys.finished)).toBeGreaterThan(0);
    });

    it('records and entries of the version before the hold: read and retried as they were, held once added again', async () => {
      await backend.flushall();
      const store = redisStore({ now, maxBytes: 40_000 });
      const list = new RedisDeadLetterStore({ redis: backend.client, layout, now, records: store });
      // What that version left: a dead-lettered record in the finished set (its write is
      // the same) and its entry, added without a hold.
      const at = new Date(clock - 50 * 60_000).toISOString();
      const dead = execution('old', 60, { status: 'failed', finishedAt: at, deadLetteredAt: at });
      await store.save({ ...dead, status: 'running' });
      await store.save(dead);
      const entry = deadLetterOf(dead);
      await backend.client.zadd(layout.deadLetters.index, Date.parse(at), 'old');
      await backend.client.hset(layout.deadLetters.entries, 'old', JSON.stringify(entry));
      expect(await store.heldBytes()).toBe(0);
      expect(await list.get('old')).toEqual(entry);
      expect(await store.get('old')).toMatchObject({ deadLetteredAt: at });
      // A worker taking over its job adds the entry again: the record is held from then.
      expect(await list.add(entry)).toBe(true);
      expect(await store.heldBytes()).toBeGreaterThan(0);
      for (let i = 0; i < 150; i++)
        await store.save(execution(`b${i}`, 40 - i / 1000, { output: 'z'.repeat(900) }));
      expect((await store.stats()).evictions.bytes).toBeGreaterThan(0);
      expect(await store.get('old')).toMatchObject({ deadLetteredAt: at });
      // Its retry takes the entry, as before, and releases the record once started.
      const taken = await list.take('old');
      expect(taken?.entry).toEqual(entry);
      await list.release(taken as TakenDeadLetter);
      expect(await store.heldBytes()).toBe(0);
    });

    it('a dead-lettered execution saved again later keeps the expiry its dead-lettering gave it', async () => {
      await backend.flushall();
      const store = redisStore({ ttlMs: 100_000 });
      // Dead-lettered 50 s ago; its callback's outcome is saved now.
      const at = new Date(Date.now() - 50_000).toISOString();
      const dead = {
        ...execution('late', 0),
        createdAt: at,
        status: 'failed' as const,
        finishedAt: at,
        deadLetteredAt: at,
      };
      await store.save({ ...execution('late', 0), createdAt: at, status: 'running' });
      await store.save(dead);
      await store.save({ ...dead, callback: { delivered: false, attempts: 5 } });
      // A lifetime and a minute from the dead-lettering: 110 s left, not 160 s.
      const left = await backend.client.pttl(layout.of('late').execution('late'));
      expect(left).toBeLessThanOrEqual(100_000 + FINISHED_GRACE_MS - 50_000);
      expect(left).toBeGreaterThan(100_000 + FINISHED_GRACE_MS - 60_000);
    });

    it('a listing takes off the index what has no hash any more, once older than a lifetime', async () => {
      await backend.flushall();
      const store = redisStore({ now });
      const key = (id: string) => layout.of(id).execution(id);
      const indexed = (id: string) => backend.client.zscore(layout.of(id).index, id);
      // Queued (no expiry, as a gateway enqueues), and hashes removed by hand.
      const queued = async (id: string) => {
        await store.save(execution(id, 0, { status: 'queued' }));
        await backend.client.persist(key(id));
      };
      await queued('waiting');
      await queued('gone');
      await backend.client.del(key('gone'));
      expect((await store.list({})).map((e) => e.id)).toEqual(['waiting']);
      expect(await indexed('gone')).not.toBeNull(); // within its lifetime: left alone
      clock += 25 * HOUR;
      await queued('young');
      await backend.client.del(key('young'));
      expect((await store.list({})).map((e) => e.id)).toEqual(['waiting']);
      expect(await indexed('gone')).toBeNull();
      expect(await indexed('young')).not.toBeNull();
      expect(await indexed('waiting')).not.toBeNull();
    });

    it('a listing that takes gone entries off the index still lists what comes after them', async () => {
      await backend.flushall();
      const store = redisStore({ now });
      const key = (id: string) => layout.of(id).execution(id);
      // Older than a lifetime and still read by id (queued: no expiry), behind many
      // newer entries whose hashes have gone: more than a batch on every shard.
      const kept = Array.from({ length: 30 }, (_, i) => `kept-${i}`);
      for (const id of kept) {
        await store.save(execution(id, 30 * 60, { status: 'queued' }));
        await backend.client.persist(key(id));
      }
      const gone = Array.from({ length: 2000 }, (_, i) => `gone-${i}`);
      for (let i = 0; i < gone.length; i += 100)
        await Promise.all(
          gone.slice(i, i + 100).map(async (id) => {
            await store.save(execution(id, 26 * 60, { status: 'queued' }));
            await backend.client.del(key(id));
          }),
        );
      const listed = (await store.list({ limit: 1000 })).map((e) => e.id);
      expect(listed.sort()).toEqual([...kept].sort());
      // And again, with the index cleaned.
      expect((await store.list({ limit: 1000 })).map((e) => e.id).sort()).toEqual([...kept].sort());
    });

    it('a listing read in several batches while executions are indexed or dropped lists each once', async () => {
      // Every other one of another workflow, which the listing passes over: it reads more
      // than a batch on every shard. The newest first.
      const old = [...Array(2600).keys()].map((i) => `old-${String(i).padStart(4, '0')}`);
      const workflowOf = (i: number) => (i % 2 === 0 ? 'wf-a' : 'wf-b');
      const client = backend.client;
      // Before each batch after a shard's first, one of: a new execution indexed above
      // everything (a gateway's enqueue), the newest one taken off the index (by the
      // budget, or a listing that found its hash gone), listed already.
      for (const change of ['indexed', 'dropped'] as const) {
        await backend.flushall();
        const writer = redisStore({ now });
        for (let i = 0; i < old.length; i += 100)
          await Promise.all(
            old
              .slice(i, i + 100)
              .map((id, k) =>
                writer.save(execution(id, 1 + (i + k) / 100, { workflowId: workflowOf(i + k) })),
              ),
          );
        let batches = 0;
        let changes = 0;
        const reader = new Proxy(client, {
          get(target, name) {
            if (name === 'zrevrangebyscore')
              return async (...args: Parameters<typeof client.zrevrangebyscore>) => {
                if (batches++ >= layout.shards.length) {
                  const id = old[changes++] as string;
                  if (change === 'indexed') await writer.save(execution(`new-${id}`, 0));
                  else await client.zrem(layout.of(id).index, id);
                }
                return target.zrevrangebyscore(...args);
              };
            const value = Reflect.get(target, name) as unknown;
            return typeof value === 'function' ? (value as () => unknown).bind(target) : value;
          },
        });
        const store = redisStore({ now, redis: reader });
        const ids = (await store.list({ workflowId: 'wf-a', limit: 1000 })).map((e) => e.id);
        expect(changes).toBeGreaterThan(0);
        const expected = old.filter((_, i) => workflowOf(i) === 'wf-a').slice(0, 1000);
        expect({ change, ids }).toEqual({ change, ids: expected });
      }
    });

    it('saveWithEvents writes the final record and the last events in one step, counted in the budget once', async () => {
      await backend.flushall();
      const store = redisStore({ now });
      const created = new Date(now()).toISOString();
      const e: Execution = { ...execution('f1', 0), createdAt: created };
      await store.save({ ...e, status: 'running' });
      await store.appendEvents([{ ...event('f1', 1), at: created }]);
      const terminal: SequencedEvent = {
        type: 'completed',
        output: { ok: true },
        executionId: 'f1',
        seq: 3,
        at: created,
      };
      // Event 1 is stored already: saveWithEvents skips it and appends 2 and 3 after it.
      await store.saveWithEvents({ ...e, status: 'succeeded', output: { ok: true } }, [
        { ...event('f1', 1), at: created },
        { ...event('f1', 2), at: created },
        terminal,
      ]);
      expect((await store.get('f1'))?.status).toBe('succeeded');
      expect((await store.events('f1', 0)).map((x) => x.seq)).toEqual([1, 2, 3]);
      expect(await store.load('f1')).toMatchObject({ eventCount: 3 });
      const stats = await store.stats();
      const record = (await backend.client.hget(layout.of('f1').execution('f1'), 'r')) ?? '';
      expect(JSON.parse(record)).toMatchObject({ id: 'f1', status: 'succeeded' });
      expect(stats.entries).toBe(1);
      expect(stats.bytes).toBeGreaterThan(record.length);
      // Once more (a run taken again after its acknowledgement was lost): no duplicate.
      await store.saveWithEvents({ ...e, status: 'succeeded', output: { ok: true } }, [terminal]);
      expect((await store.events('f1', 0)).map((x) => x.seq)).toEqual([1, 2, 3]);
      expect((await store.stats()).bytes).toBe(stats.bytes);
    });

    it('take reads new jobs with their records and event counts; saveWithEvents acknowledges one', async () => {
      await backend.flushall();
      const store = redisStore({ now });
      // Three executions on one shard, queued as a gateway does (record, event, job).
      const shard = layout.of('t0');
      const ids: string[] = [];
      for (let i = 0; ids.length < 3; i++) if (layout.of(`t${i}`) === shard) ids.push(`t${i}`);
      const created = new Date(now()).toISOString();
      await backend.client.xgroup('CREATE', shard.stream, 'workers', '0', 'MKSTREAM');
      for (const id of ids) {
        await store.save(execution(id, 0, { status: 'queued', createdAt: created }));
        await store.appendEvents([{ ...event(id, 1), at: created }]);
        // The last job's id is not its first field (the script's fast path reads a
        // leading id; any other job is decoded whole).
        const job = id === ids[2] ? { triggerKey: 'k', id } : { id };
        await backend.client.xadd(shard.stream, '*', 'job', JSON.stringify(job));
      }
      // A job whose record is gone, and an entry that is not a job.
      await backend.client.xadd(shard.stream, '*', 'job', JSON.stringify({ id: `${ids[0]}-gone` }));
      await backend.client.xadd(shard.stream, '*', 'other', 'x');
      const taken = await store.take(shard, 'c1', 10);
      expect(taken.map((j) => [j.execution?.id, j.execution?.status, j.eventCount])).toEqual([
        ...ids.map((id) => [id, 'queued', 1]),
        [undefined, undefined, 0],
        [undefined, undefined, 0],
      ]);
      expect(await store.take(shard, 'c1', 10)).toEqual([]); // delivered once
      const [first] = taken;
      const e = first?.execution as Execution;
      await store.saveWithEvents(
        { ...e, status: 'succeeded', output: { ok: true } },
        [{ type: 'completed', output: { ok: true }, executionId: e.id, seq: 2, at: created }],
        first?.entryId,
      );
      // Acknowledged and deleted with the record: the other four are still pending.
      const pending = (await backend.client.xpending(shard.stream, 'workers')) as [number];
      expect(pending[0]).toBe(4);
      expect(await backend.client.xlen(shard.stream)).toBe(4);
      expect(await store.load(e.id)).toMatchObject({
        execution: { status: 'succeeded' },
        eventCount: 2,
      });
    });

    it('writes sent at once, on every shard: each acknowledged, in the order sent, every event once', async () => {
      await backend.flushall();
      const store = redisStore({ now });
      const created = new Date(now()).toISOString();
      const ids = Array.from({ length: 40 }, (_v, i) => `w${i}`);
      for (const stream of new Set(ids.map((id) => layout.of(id).stream)))
        await backend.client.xgroup('CREATE', stream, 'workers', '0', 'MKSTREAM');
      const entries = new Map<string, string>();
      for (const id of ids) {
        await store.save(execution(id, 0, { status: 'queued', createdAt: created }));
        await store.appendEvents([{ ...event(id, 1), at: created }]);
        const stream = layout.of(id).stream;
        await backend.client.xadd(stream, '*', 'job', JSON.stringify({ id }));
        const read = (await backend.client.xreadgroup(
          'GROUP',
          'workers',
          'c1',
          'COUNT',
          1,
          'STREAMS',
          stream,
          '>',
        )) as [[string, [[string, string[]]]]];
        const entry = read[0][1][0][0];
        entries.set(id, entry);
      }
      // All at once, one execution written twice (running, then finished): they reach
      // Redis in the order sent, so the finished record and all its events win.
      const done = (id: string, seq: number) =>
        ({ type: 'completed', output: { id }, executionId: id, seq, at: created }) as const;
      await Promise.all([
        store.saveWithEvents(execution('w0', 0, { status: 'running', createdAt: created }), [
          { ...event('w0', 2), at: created },
        ]),
        ...ids.map((id) =>
          store.saveWithEvents(
            execution(id, 0, { createdAt: created, output: { id } }),
            id === 'w0' ? [{ ...event(id, 2), at: created }, done(id, 3)] : [done(id, 2)],
            entries.get(id),
          ),
        ),
      ]);
      for (const id of ids) {
        expect((await store.get(id))?.output).toEqual({ id });
        const seqs = (await store.events(id, 0)).map((e) => e.seq);
        expect(seqs).toEqual(id === 'w0' ? [1, 2, 3] : [1, 2]);
      }
      for (const stream of new Set(ids.map((id) => layout.of(id).stream)))
        expect(await backend.client.xlen(stream)).toBe(0);
      expect((await store.stats()).entries).toBe(40);
    });

    it('publishes nothing for an execution nobody watches; once watched, every new event once, in order, one per message', async () => {
      await backend.flushall();
      const store = redisStore({ now });
      const created = new Date(now()).toISOString();
      const id = 'p1';
      // Sharded pub/sub (one connection per master on a cluster).
      const subscriber = shardedSubscriberClient(backend.client);
      const messages: string[] = [];
      try {
        subscriber.on('smessage', (_channel: string, message: string) => messages.push(message));
        await subscriber.ssubscribe(layout.of(id).channel(id));
        await subscriber.ssubscribe(layout.of('p0').channel('p0'));
        // p0: written and finished with nobody watching, then watched: nothing published.
        await store.saveWithEvents(execution('p0', 0, { createdAt: created }), [
          { ...event('p0', 1), at: created },
        ]);
        expect((await store.watchEvents('p0', 0)).map((e) => e.seq)).toEqual([1]);
        // p1: watched before its first write (the mark makes a hash that expires), then
        // written; an event already stored is not published again.
        expect(await store.watchEvents(id, 0)).toEqual([]);
        const ttl = await backend.client.pttl(layout.of(id).execution(id));
        expect(ttl).toBeGreaterThan(0);
        await store.save(execution(id, 0, { status: 'running', createdAt: created }));
        await store.appendEvents([{ ...event(id, 1), at: created }]);
        await store.saveWithEvents(execution(id, 0, { createdAt: created, output: { ok: true } }), [
          { ...event(id, 1), at: created }, // stored already: not published again
          { ...event(id, 2), at: created },
          { type: 'completed', output: { ok: true }, executionId: id, seq: 3, at: created },
        ]);
        await eventually(() => expect(messages).toHaveLength(3));
        await sleep(50); // nothing more comes (none of p0's)
        const published = messages.map((m) => JSON.parse(m) as { seq: number; type: string });
        expect(published.map((e) => [e.seq, e.type])).toEqual([
          [1, 'queued'],
          [2, 'queued'],
          [3, 'completed'],
        ]);
      } finally {
        subscriber.disconnect();
      }
    });

    it('discard of an execution nobody watches: its hash, whole copies and index entry go, its job is acknowledged, in one script', async () => {
      await backend.flushall();
      const store = redisStore({ now });
      const created = new Date(now()).toISOString();
      const id = 'd0';
      const keys = layout.of(id);
      await backend.client.xgroup('CREATE', keys.stream, 'workers', '0', 'MKSTREAM');
      await store.save(execution(id, 0, { status: 'queued', createdAt: created }));
      await store.appendEvents([{ ...event(id, 1), at: created }]);
      await backend.client.xadd(keys.stream, '*', 'job', JSON.stringify({ id }));
      const [job] = await store.take(keys, 'c1', 1);
      // A respond event with a body over the stored limit: its whole copy has a key.
      await store.appendEvents([
        {
          type: 'respond',
          response: { statusCode: 200, headers: {}, body: big(5000) },
          executionId: id,
          seq: 2,
          at: created,
        },
      ]);
      expect(await backend.client.exists(keys.whole(id, 2))).toBe(1);
      await store.save(execution('d-other', 0, { createdAt: created }));
      const before = await store.stats();
      const scripts = await scriptCalls();
      await store.discard(
        execution(id, 0, { createdAt: created, output: { ok: true } }),
        [{ type: 'completed', output: { ok: true }, executionId: id, seq: 3, at: created }],
        { acknowledge: job?.entryId as string },
      );
      expect(await scriptCalls()).toBe(scripts + 1);
      expect(await backend.client.exists(keys.execution(id), keys.whole(id, 2))).toBe(0);
      expect(await backend.client.zscore(keys.index, id)).toBeNull();
      expect(await backend.client.xlen(keys.stream)).toBe(0);
      const pending = (await backend.client.xpending(keys.stream, 'workers')) as [number];
      expect(pending[0]).toBe(0);
      expect(await store.stats()).toMatchObject({ bytes: before.bytes, entries: before.entries });
      expect(await store.get(id)).toBeUndefined();
      expect(await store.events(id, 0)).toEqual([]);
      expect((await store.list({})).map((e) => e.id)).toEqual(['d-other']);

      /** EVALSHA and EVAL calls this Redis has run (the discard's master on a cluster). */
      async function scriptCalls(): Promise<number> {
        const node = backend.client.isCluster
          ? (
              backend.client as unknown as {
                nodes(role: string): { info(s: string): Promise<string> }[];
              }
            ).nodes('master')
          : [backend.client];
        let calls = 0;
        for (const n of node) {
          const info = await n.info('commandstats');
          for (const m of info.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g))
            calls += Number(m[1]);
        }
        return calls;
      }
    });

    it('discard of a watched execution: its new events are published and read for the handover time, without the record', async () => {
      await backend.flushall();
      const store = redisStore({ now, handoverMs: HANDOVER_MS });
      const created = new Date(now()).toISOString();
      const id = 'dw';
      const keys = layout.of(id);
      const subscriber = shardedSubscriberClient(backend.client);
      const messages: string[] = [];
      try {
        subscriber.on('smessage', (_channel: string, message: string) => messages.push(message));
        await subscriber.ssubscribe(keys.channel(id));
        await store.save(execution(id, 0, { status: 'running', createdAt: created }));
        await store.appendEvents([{ ...event(id, 1), at: created }]);
        expect((await store.watchEvents(id, 0)).map((e) => e.seq)).toEqual([1]);
        const completed: SequencedEvent = {
          type: 'completed',
          output: big(5000),
          executionId: id,
          seq: 2,
          at: created,
        };
        await store.discard(execution(id, 0, { createdAt: created, output: big(5000) }), [
          { ...event(id, 1), at: created }, // stored already: not published again
          completed,
        ]);
        await eventually(() => expect(messages).toHaveLength(1));
        expect(JSON.parse(messages[0] as string)).toEqual(completed);
        // The end is read whole (a gateway that subscribes just now), the record is not.
        expect(await store.events(id, 1)).toEqual([completed]);
        expect(await store.get(id)).toBeUndefined();
        expect(await backend.client.hexists(keys.execution(id), 'i')).toBe(0);
        expect(await backend.client.zscore(keys.index, id)).toBeNull();
        const ttl = await backend.client.pttl(keys.execution(id));
        expect(ttl).toBeGreaterThan(0);
        expect(ttl).toBeLessThanOrEqual(HANDOVER_MS);
        await eventually(async () =>
          expect(await backend.client.exists(keys.execution(id))).toBe(0),
        );
        expect(await store.events(id, 0)).toEqual([]);
      } finally {
        subscriber.disconnect();
      }
    });

    it("publishes with PUBLISH to a gateway from before sharded pub/sub (its mark is '1')", async () => {
      await backend.flushall();
      const store = redisStore({ now });
      const created = new Date(now()).toISOString();
      const id = 'old1';
      const subscriber = backend.connect();
      const messages: string[] = [];
      try {
        subscriber.on('message', (_channel: string, message: string) => messages.push(message));
        await subscriber.subscribe(layout.of(id).channel(id));
        // What an older gateway's watch left: the mark '1' (it listens with SUBSCRIBE).
        await store.save(execution(id, 0, { status: 'running', createdAt: created }));
        await backend.client.hset(layout.of(id).execution(id), EXECUTION_FIELDS.watched, '1');
        await store.appendEvents([{ ...event(id, 1), at: created }]);
        await eventually(() => expect(messages).toHaveLength(1));
        expect(JSON.parse(messages[0] as string)).toMatchObject({ seq: 1, executionId: id });
      } finally {
        subscriber.disconnect();
      }
    });

    it('keeps the input apart: written once, not sent again by a worker, cut when a finished record needs it', async () => {
      await backend.flushall();
      const store = redisStore({ now });
      const created = new Date(now()).toISOString();
      const shard = layout.of('i0');
      const ids: string[] = [];
      for (let i = 0; ids.length < 2; i++) if (layout.of(`i${i}`) === shard) ids.push(`i${i}`);
      const [small, large] = ids as [string, string];
      await backend.client.xgroup('CREATE', shard.stream, 'workers', '0', 'MKSTREAM');
      for (const [id, body] of [
        [small, { id: small }],
        [large, big(5000)],
      ] as const) {
        await store.save(
          execution(id, 0, { status: 'queued', createdAt: created, input: trigger(body) }),
        );
        await backend.client.xadd(shard.stream, '*', 'job', JSON.stringify({ id }));
      }
      const key = (id: string) => layout.of(id).execution(id);
      // `r` has no input; `i` has it.
      const [r, i] = await backend.client.hmget(key(small), 'r', 'i');
      expect(JSON.parse(r ?? '{}')).not.toHaveProperty('input');
      expect(JSON.parse(i ?? '{}')).toMatchObject({ body: { id: small } });
      // A worker takes both and finishes them. The small one's input is not sent again:
      // a marker written meanwhile survives. The large one's is cut, so it is sent.
      const taken = await store.take(shard, 'c1', 10);
      expect(taken.map((j) => j.execution?.input.body)).toEqual([{ id: small }, big(5000)]);
      const marker = JSON.stringify(trigger({ marker: true }));
      await backend.client.hset(key(small), 'i', marker);
      for (const job of taken) {
        const e = job.execution as Execution;
        await store.saveWithEvents({ ...e, status: 'succeeded' }, [], job.entryId);
      }
      expect(await backend.client.hget(key(small), 'i')).toBe(marker);
      expect((await store.get(small))?.input.body).toEqual({ marker: true });
      const cut = await store.get(large);
      expect(cut?.truncated).toEqual({ 'input.body': JSON.stringify(big(5000)).length });
      expect(String(cut?.input.body).length).toBeLessThanOrEqual(BODY_MAX);
      // The budget counts record, input and events.
      // (The small one's input as the store knows it, not the marker written around it.)
      const records = await Promise.all(ids.map((id) => backend.client.hget(key(id), 'r')));
      const inputs = [i, await backend.client.hget(key(large), 'i')];
      const bytes = [...records, ...inputs].reduce((n, v) => n + (v?.length ?? 0), 0);
      expect((await store.stats()).bytes).toBeGreaterThanOrEqual(bytes);
      // A listing and a page read the input back.
      const listed = await store.list({ limit: 10 });
      expect(listed.find((e) => e.id === small)?.input.body).toEqual({ marker: true });
      // A record from before the input was apart (input inside `r`, no `i`) reads as it
      // was, and its next save writes `i`.
      const old = execution('old1', 0, { status: 'running', createdAt: created });
      await backend.client.hset(key('old1'), 'r', JSON.stringify(old), 'n', 0, 'c', now());
      expect((await store.get('old1'))?.input).toEqual(old.input);
      const loaded = (await store.load('old1')).execution as Execution;
      await store.save({ ...loaded, status: 'succeeded' });
      expect(JSON.parse((await backend.client.hget(key('old1'), 'i')) ?? '{}')).toEqual(old.input);
    });

    it('a queued or running record keeps its input whole: a worker runs it from there', async () => {
      await backend.flushall();
      const store = redisStore({ now });
      await store.save(execution('q1', 0, { status: 'queued', input: trigger(big(5000)) }));
      expect((await store.get('q1'))?.input.body).toEqual(big(5000));
      await store.save(execution('q1', 0, { status: 'succeeded', input: trigger(big(5000)) }));
      expect((await store.get('q1'))?.truncated).toEqual({
        'input.body': JSON.stringify(big(5000)).length,
      });
      await eventually(async () => expect((await store.stats()).entries).toBe(1));
    });

    type Stored = { log: Record<string, unknown>[] };
    it("keeps no copy of the input's summary in the log line of the node that got the input, and makes it on read", async () => {
      await backend.flushall();
      const store = redisStore({ now });
      const node = { id: 'first', type: 'transform' } as WorkflowNode;
      const line = (input: Execution['input']) => {
        const run = startedRun(node, new Date(now()).toISOString(), input, undefined, 40);
        return Object.assign(run, { status: 'succeeded' as const, outputSummary: '{}' });
      };
      const small = trigger({ id: 's1', note: 'é'.repeat(50) });
      await store.save(execution('s1', 0, { input: small, log: [line(small)] }));
      const raw: Stored = JSON.parse(
        (await backend.client.hget(layout.of('s1').execution('s1'), 'r')) ?? '{}',
      );
      expect(raw.log[0]).not.toHaveProperty('inputSummary');
      expect(raw.log[0]).toMatchObject({
        nodeId: 'first',
        outputSummary: '{}',
        inputSummaryOfInput: 40,
      });
      const read = (await store.get('s1')) as Execution;
      // What the line serialises to, its summary included.
      expect(read.log[0]).toEqual(JSON.parse(JSON.stringify(line(small))));
      expect(read.log[0]?.inputSummary).toBe(summarize(small, 40));
      expect(read.log[0]).not.toHaveProperty('inputSummaryOfInput');
      expect((await store.list({ limit: 5 }))[0]?.log[0]?.inputSummary).toBe(summarize(small, 40));
      expect((await store.load('s1')).execution?.log[0]?.inputSummary).toBe(summarize(small, 40));
      // A finished record whose input is cut keeps the summary of the whole input.
      const large = trigger(big(5000));
      await store.save(execution('l1', 0, { input: large, log: [line(large)] }));
      const cut: Stored = JSON.parse(
        (await backend.client.hget(layout.of('l1').execution('l1'), 'r')) ?? '{}',
      );
      expect(cut.log[0]).toMatchObject({ inputSummary: summarize(large, 40) });
      expect(cut.log[0]).not.toHaveProperty('inputSummaryOfInput');
      expect((await store.get('l1'))?.log[0]?.inputSummary).toBe(summarize(large, 40));
      // Lines with a summary of their own are kept as they are.
      const plain = { ...line(small), inputSummary: 'given' };
      await store.save(execution('p1', 0, { input: small, log: [plain] }));
      expect((await store.get('p1'))?.log[0]?.inputSummary).toBe('given');
    });

    it('a page cut short by the scan bound continues before a whole second, naming no execution it passed over', async () => {
      await backend.flushall();
      // Looks at 50 ids a page at most: team-a's 3 oldest lie behind 150 of team-b.
      const store = redisStore({ now, listScanCap: 50 });
      const readable: string[] = [];
      const others = new Set<string>();
      const save = async (id: string, secondsAgo: number, triggerKey: string) => {
        await store.save(execution(id, secondsAgo / 60, { triggerKey }));
        if (triggerKey.startsWith('team-a/')) readable.unshift(id);
        else others.add(id);
      };
      for (let i = 0; i < 3; i++) await save(`a-old${i}`, 1000 - i, 'team-a/ingest');
      for (let i = 0; i < 150; i++) await save(`b${i}`, 900 - i * 0.37, 'team-b/ingest');
      for (let i = 0; i < 4; i++) await save(`a-new${i}`, 100 - i, 'team-a/ingest');
      const triggerReadable = (key: string) => key.startsWith('team-a/');
      const seen: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      let timesAlone = 0;
      do {
        const page = await store.page({ limit: 3, triggerReadable, ...(cursor ? { cursor } : {}) });
        seen.push(...page.items.map((e) => e.id));
        cursor = page.next;
        pages++;
        const at = cursor ? decodeCursor(cursor) : undefined;
        if (at?.key !== undefined) {
          // Exact: the last item shown.
          expect(at.key).toBe(page.items.at(-1)?.id);
        } else if (at) {
          // A time alone, a whole second: no execution's id, nor its millisecond.
          expect(at.ms % 1000).toBe(0);
          timesAlone++;
        }
        expect(others.has(at?.key ?? '')).toBe(false);
      } while (cursor && pages < 20);
      expect(cursor).toBeUndefined();
      expect(seen).toEqual(readable);
      expect(timesAlone).toBeGreaterThan(0);
      expect(pages).toBeLessThanOrEqual(8);
    });

    // Only where there are shards to merge (registered, not skipped, elsewhere).
    if (shards > 1)
      it('pages merge the shards by creation time, however the ids fall on them', async () => {
        await backend.flushall();
        const store = redisStore({ now });
        // 40 executions, some created in the same millisecond, spread over the shards.
        for (let i = 0; i < 40; i++) await store.save(execution(`m${i}`, 40 - Math.floor(i / 3)));
        const counts = new Set(Array.from({ length: 40 }, (_v, i) => layout.shardOf(`m${i}`)));
        expect(counts.size).toBe(shards);
        const all = (await store.list({ limit: 1000 })).map((e) => e.id);
        const expected = Array.from({ length: 40 }, (_v, i) => `m${i}`).sort((a, b) => {
          const ma = 40 - Math.floor(Number(a.slice(1)) / 3);
          const mb = 40 - Math.floor(Number(b.slice(1)) / 3);
          return ma !== mb ? ma - mb : a < b ? 1 : -1;
        });
        expect(all).toEqual(expected);
        const seen: string[] = [];
        let cursor: string | undefined;
        do {
          const page = await store.page({ limit: 7, ...(cursor ? { cursor } : {}) });
          seen.push(...page.items.map((e) => e.id));
          cursor = page.next;
        } while (cursor && seen.length < 100);
        expect(seen).toEqual(expected);
      });
  });
}

describe('resumeBefore: where a page cut short by its scan bound goes on', () => {
  it('a whole second past the last entry looked at, when no item shown (or first looked at) is before it', () => {
    expect(resumeBefore(1_000_250, 1_003_000)).toBe(1_001_000);
    expect(resumeBefore(1_000_250, 1_001_000)).toBe(1_001_000);
  });

  it('else the millisecond after it; nothing when all it looked at share a millisecond', () => {
    expect(resumeBefore(1_000_250, 1_000_900)).toBe(1_000_251);
    expect(resumeBefore(1_000_250, 1_000_250)).toBeUndefined();
  });

  it('its cursor is a time alone, read back as one; a malformed one is none', () => {
    const cursor = encodeCursor({ ms: 1_001_000 });
    expect(decodeCursor(cursor)).toEqual({ ms: 1_001_000 });
    expect(decodeCursor(encodeCursor({ ms: 5, key: 'abc' }))).toEqual({ ms: 5, key: 'abc' });
    for (const raw of ['1001000.', '.abc', '12a', ''])
      expect(decodeCursor(Buffer.from(raw).toString('base64url') || '!')).toBeUndefined();
  });
});
