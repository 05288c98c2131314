// The replay store, both adapters: a claim is held for its TTL, released claims are
// free again, and of many concurrent claims of one key exactly one wins. Then the same
// delivery sent many times at once, through two verifiers (two gateway replicas): in
// memory and against a real redis-server, exactly one is accepted.
import { Redis } from 'ioredis';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpProblem, StoreUnavailableError } from '../../runtime/errors.ts';
import {
  MemoryReplayStore,
  type ReplayStore,
} from '../../runtime/gateway/security/auth/signature/replay.ts';
import { RedisReplayStore } from '../../runtime/gateway/security/auth/signature/replay-redis.ts';
import { SignatureVerifier } from '../../runtime/gateway/security/auth/signature/verify.ts';
import { sleep } from '../support/eventually.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';
import { githubSignature, signedRoute } from './support.ts';

interface Pair {
  store: ReplayStore;
  /** Another handle on the same state (another replica). */
  other: ReplayStore;
}

function contract(name: string, make: () => Pair) {
  describe(name, () => {
    it('a key is claimed once, until released', async () => {
      const { store, other } = make();
      expect(await store.claim('k1', 60_000)).toBe(true);
      expect(await store.claim('k1', 60_000)).toBe(false);
      expect(await other.claim('k1', 60_000)).toBe(false);
      await other.release('k1');
      expect(await store.claim('k1', 60_000)).toBe(true);
    });

    it('a claim expires after its TTL', async () => {
      const { store, other } = make();
      expect(await store.claim('k2', 50)).toBe(true);
      await sleep(200);
      expect(await other.claim('k2', 60_000)).toBe(true);
    });

    it('of 100 concurrent claims of one key exactly one wins', async () => {
      const { store, other } = make();
      const results = await Promise.all(
        Array.from({ length: 100 }, (_v, i) => (i % 2 ? store : other).claim('k3', 60_000)),
      );
      expect(results.filter(Boolean)).toHaveLength(1);
    });
  });
}

async function duplicatesAtOnce(stores: [ReplayStore, ReplayStore]) {
  const secret = `whsec_${Buffer.from('replay-test-secret-0123456789').toString('base64')}`;
  const route = signedRoute({ preset: 'standardWebhooks' }, { current: secret });
  const now = Math.floor(Date.now() / 1000);
  const payload = '{"type":"order.created"}';
  const headers = {
    'webhook-id': `msg_${now}`,
    'webhook-timestamp': String(now),
    'webhook-signature': new Webhook(secret).sign(`msg_${now}`, new Date(now * 1000), payload),
  };
  const verifiers = stores.map((replay) => new SignatureVerifier({ replay }));
  const results = await Promise.allSettled(
    Array.from({ length: 50 }, (_v, i) =>
      verifiers[i % 2]!.verify(route, headers, Buffer.from(payload)),
    ),
  );
  const accepted = results.filter((r) => r.status === 'fulfilled');
  const refused = results.flatMap((r) =>
    r.status === 'rejected' && r.reason instanceof HttpProblem ? [r.reason.code] : [],
  );
  expect(accepted).toHaveLength(1);
  expect(refused).toEqual(Array.from({ length: 49 }, () => 'HG_ERR_SIGNATURE_REPLAYED'));

  // GitHub: the same X-GitHub-Delivery id, concurrently, on both replicas.
  const github = signedRoute({ preset: 'github' }, { webhook: 'gh-secret' }, 'ci/builds');
  const ghHeaders = {
    'x-hub-signature-256': githubSignature('gh-secret', payload),
    'x-github-delivery': `d-${now}`,
  };
  const gh = await Promise.allSettled(
    Array.from({ length: 20 }, (_v, i) =>
      verifiers[i % 2]!.verify(github, ghHeaders, Buffer.from(payload)),
    ),
  );
  expect(gh.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
}

contract('MemoryReplayStore', () => {
  const store = new MemoryReplayStore();
  return { store, other: store };
});

describe('MemoryReplayStore bounds', () => {
  it('holds at most maxKeys, dropping the oldest', async () => {
    const store = new MemoryReplayStore({ maxKeys: 3 });
    for (const key of ['a', 'b', 'c', 'd']) expect(await store.claim(key, 60_000)).toBe(true);
    expect(store.size).toBe(3);
    expect(await store.claim('a', 60_000)).toBe(true);
    expect(await store.claim('d', 60_000)).toBe(false);
  });
});

describe('duplicate deliveries at once, embedded', () => {
  it('exactly one is accepted', async () => {
    const store = new MemoryReplayStore();
    await duplicatesAtOnce([store, store]);
  });
});

describe.skipIf(!redisAvailable())('Redis', () => {
  let server: RedisServer;
  const clients: Redis[] = [];
  const client = () => {
    const redis = new Redis(server.url);
    clients.push(redis);
    return redis;
  };
  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await server.stop();
  });

  contract('RedisReplayStore', () => ({
    store: new RedisReplayStore({ redis: client() }),
    other: new RedisReplayStore({ redis: client() }),
  }));

  it('duplicate deliveries at once on two replicas: exactly one is accepted', async () => {
    await duplicatesAtOnce([
      new RedisReplayStore({ redis: client() }),
      new RedisReplayStore({ redis: client() }),
    ]);
  });

  it('keys live under hookgate:replay: with the TTL of the tolerance window', async () => {
    const redis = client();
    await redis.flushdb();
    const route = signedRoute({ preset: 'github', toleranceSeconds: 120 }, { w: 's' }, 'a/b');
    const verifier = new SignatureVerifier({ replay: new RedisReplayStore({ redis }) });
    await verifier.verify(
      route,
      { 'x-hub-signature-256': githubSignature('s', 'x'), 'x-github-delivery': 'ttl-1' },
      Buffer.from('x'),
    );
    const keys = await redis.keys('hookgate:replay:*');
    expect(keys).toHaveLength(1);
    const ttls = await Promise.all(keys.map((k) => redis.pttl(k)));
    expect(Math.max(...ttls)).toBeLessThanOrEqual(120_000);
    expect(Math.max(...ttls)).toBeGreaterThan(60_000);
  });

  it('Redis down: the check fails closed with 503 store-unavailable', async () => {
    const down = new Redis({
      port: 1,
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
    });
    down.on('error', () => {});
    clients.push(down);
    const route = signedRoute({ preset: 'github' }, { w: 's' });
    const verifier = new SignatureVerifier({ replay: new RedisReplayStore({ redis: down }) });
    const error = await verifier
      .verify(
        route,
        { 'x-hub-signature-256': githubSignature('s', 'x'), 'x-github-delivery': 'down-1' },
        Buffer.from('x'),
      )
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    const problem = (error as StoreUnavailableError).toProblem();
    expect(problem.code).toBe('HG_ERR_STORE_UNAVAILABLE');
    expect(problem.status).toBe(503);
  });
});
