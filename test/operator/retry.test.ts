// client-go util/retry semantics (O4: DefaultRetry is 5 steps of 10 ms, jitter 0.1).
import { describe, expect, it } from 'vitest';
import { KubeApiError } from '../../operator/controller/kube-client.ts';
import { DEFAULT_RETRY, retryOnConflict, retryOnError } from '../../operator/controller/retry.ts';

const conflict = (): KubeApiError => new KubeApiError(409, 'conflict', 'Conflict');

describe('retryOnConflict', () => {
  it('DefaultRetry: 5 attempts, 4 sleeps of 10 ms plus up to 10 % jitter', async () => {
    const sleeps: number[] = [];
    let calls = 0;
    const err = await retryOnConflict(
      DEFAULT_RETRY,
      () => {
        calls++;
        return Promise.reject(conflict());
      },
      { sleep: (ms) => (sleeps.push(ms), Promise.resolve()), random: () => 0.5 },
    ).catch((e: unknown) => e);
    expect(calls).toBe(5);
    expect(err).toBeInstanceOf(KubeApiError);
    expect((err as KubeApiError).code).toBe(409);
    expect(sleeps).toEqual([10.5, 10.5, 10.5, 10.5]);
  });

  it('returns as soon as an attempt succeeds, passing the attempt number', async () => {
    const attempts: number[] = [];
    const result = await retryOnConflict(
      DEFAULT_RETRY,
      (attempt) => {
        attempts.push(attempt);
        return attempt < 2 ? Promise.reject(conflict()) : Promise.resolve('ok');
      },
      { sleep: () => Promise.resolve() },
    );
    expect(result).toBe('ok');
    expect(attempts).toEqual([0, 1, 2]);
  });

  it('does not retry other errors', async () => {
    let calls = 0;
    await expect(
      retryOnConflict(DEFAULT_RETRY, () => {
        calls++;
        return Promise.reject(new KubeApiError(500, 'boom'));
      }),
    ).rejects.toThrow('boom');
    expect(calls).toBe(1);
  });

  it('grows the sleep by the factor and honours the cap', async () => {
    const sleeps: number[] = [];
    await retryOnError(
      { steps: 5, durationMs: 10, factor: 5, jitter: 0, capMs: 300 },
      () => true,
      () => Promise.reject(new Error('x')),
      { sleep: (ms) => (sleeps.push(ms), Promise.resolve()) },
    ).catch(() => {});
    expect(sleeps).toEqual([10, 50, 250, 300]);
  });
});
