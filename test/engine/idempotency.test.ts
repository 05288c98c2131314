import { describe, expect, it } from 'vitest';
import {
  MemoryIdempotencyStore,
  parseIdempotencyKey,
  requestFingerprint,
  type BeginResult,
  type IdempotencyRecord,
} from '../../runtime/gateway/idempotency/store.ts';

/** The owner id of a 'new'. */
function ownerOf(result: BeginResult): string {
  if (result.state !== 'new') throw new Error(`expected new, got ${result.state}`);
  return result.owner;
}

const record: IdempotencyRecord = {
  status: 202,
  headers: { 'content-type': 'application/json' },
  body: { executionId: 'exec-1', status: 'queued' },
  executionId: 'exec-1',
};

describe('MemoryIdempotencyStore', () => {
  it('of many simultaneous begins with one key exactly one is new', async () => {
    const store = new MemoryIdempotencyStore();
    const results = await Promise.all(
      Array.from({ length: 200 }, () => store.begin('k1', 'fp', 60_000)),
    );
    expect(results.filter((r) => r.state === 'new')).toHaveLength(1);
    expect(results.filter((r) => r.state === 'in-progress')).toHaveLength(199);
  });

  it('mixed fingerprints: one new, the same request in progress, others mismatch', async () => {
    const store = new MemoryIdempotencyStore();
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => store.begin('k', i % 2 ? 'other' : 'fp', 60_000)),
    );
    expect(results[0]).toEqual({ state: 'new', owner: expect.any(String) });
    expect(results.filter((r) => r.state === 'new')).toHaveLength(1);
    expect(results.filter((r) => r.state === 'mismatch')).toHaveLength(25);
    expect(results.filter((r) => r.state === 'in-progress')).toHaveLength(24);
  });

  it('replays the completed record; a different request under the key is a mismatch', async () => {
    const store = new MemoryIdempotencyStore();
    const begun = await store.begin('k', 'fp', 60_000);
    expect(begun).toEqual({ state: 'new', owner: expect.any(String) });
    await store.complete('k', ownerOf(begun), record);
    expect(await store.begin('k', 'fp', 60_000)).toEqual({ state: 'replay', record });
    expect(await store.begin('k', 'fp2', 60_000)).toEqual({ state: 'mismatch' });
    // Replays hand out copies.
    const replay = await store.begin('k', 'fp', 60_000);
    if (replay.state === 'replay') replay.record.status = 500;
    expect(await store.begin('k', 'fp', 60_000)).toEqual({ state: 'replay', record });
  });

  it('abandon releases an unfinished claim but not a completed one', async () => {
    const store = new MemoryIdempotencyStore();
    await store.abandon('k', ownerOf(await store.begin('k', 'fp', 60_000)));
    const again = ownerOf(await store.begin('k', 'fp', 60_000));
    await store.complete('k', again, record);
    await store.abandon('k', again);
    expect((await store.begin('k', 'fp', 60_000)).state).toBe('replay');
  });

  it('claims and records expire after their TTL', async () => {
    let now = 1_000_000;
    const store = new MemoryIdempotencyStore({ now: () => now });
    await store.begin('k', 'fp', 1000);
    now += 1001;
    const begun = await store.begin('k', 'other', 1000);
    expect(begun).toEqual({ state: 'new', owner: expect.any(String) });
    await store.complete('k', ownerOf(begun), record, 5000);
    now += 4000;
    expect((await store.begin('k', 'other', 1000)).state).toBe('replay');
    now += 1001;
    expect((await store.begin('k', 'fp', 1000)).state).toBe('new');
  });

  it('is bounded by maxKeys', async () => {
    const store = new MemoryIdempotencyStore({ maxKeys: 10 });
    for (let i = 0; i < 25; i++) await store.begin(`k${i}`, 'fp', 60_000);
    expect(store.size).toBe(10);
    expect(await store.begin('k24', 'fp', 60_000)).toEqual({ state: 'in-progress' });
  });

  it('is bounded in bytes, answers included, dropping the oldest keys first', async () => {
    const store = new MemoryIdempotencyStore({ maxBytes: 64 * 1024 });
    const answer = { ...record, body: 'a'.repeat(4000) };
    for (let i = 0; i < 100; i++) {
      await store.complete(`k${i}`, ownerOf(await store.begin(`k${i}`, 'fp', 60_000)), answer);
    }
    const stats = store.stats();
    expect(stats.bytes).toBeLessThanOrEqual(64 * 1024);
    expect(stats.entries).toBeGreaterThan(10);
    expect(stats.entries).toBeLessThan(20);
    expect(stats.evictions.bytes).toBe(100 - stats.entries);
    expect(await store.begin('k99', 'fp', 60_000)).toMatchObject({ state: 'replay' });
    expect(await store.begin('k0', 'fp', 60_000)).toEqual({
      state: 'new',
      owner: expect.any(String),
    });
  });
});

describe('helpers', () => {
  it('fingerprints method, path and body', () => {
    const a = requestFingerprint('post', '/webhook/x?a=1', '{"n":1}');
    expect(a).toMatch(/^[0-9a-f]{64}$/);
    expect(requestFingerprint('POST', '/webhook/x?a=1', Buffer.from('{"n":1}'))).toBe(a);
    expect(requestFingerprint('POST', '/webhook/x?a=1', '{"n":2}')).not.toBe(a);
    expect(requestFingerprint('PUT', '/webhook/x?a=1', '{"n":1}')).not.toBe(a);
  });

  it('parses Idempotency-Key as sf-string or bare value', () => {
    expect(parseIdempotencyKey('"8e03978e-40d5-43e8-bc93-6894a57f9324"')).toBe(
      '8e03978e-40d5-43e8-bc93-6894a57f9324',
    );
    expect(parseIdempotencyKey('abc-123')).toBe('abc-123');
    for (const bad of ['', '""', 'has space', 'x'.repeat(256), 'caf\u00e9']) {
      expect(() => parseIdempotencyKey(bad)).toThrow(
        expect.objectContaining({ code: 'HG_ERR_IDEMPOTENCY_KEY_INVALID' }) as Error,
      );
    }
  });
});
