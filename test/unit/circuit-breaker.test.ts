// The circuit breaker's states: closed → open after N failures in a row, half-open
// probes by itself after the open period, and only the probe closes it again.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CircuitBreaker, type CircuitState } from '../../runtime/circuit-breaker.ts';

describe('CircuitBreaker', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  function breaker(probe: () => Promise<unknown>, threshold = 3) {
    const changes: CircuitState[] = [];
    const b = new CircuitBreaker({
      failureThreshold: threshold,
      openMs: 1000,
      probe,
      onStateChange: (state) => changes.push(state),
    });
    return { b, changes };
  }

  it('opens after failureThreshold failures in a row; a success in between resets the count', () => {
    const { b } = breaker(() => Promise.resolve());
    b.failure();
    b.failure();
    b.success();
    b.failure();
    b.failure();
    expect(b.state).toBe('closed');
    expect(b.allows()).toBe(true);
    b.failure();
    expect(b.state).toBe('open');
    expect(b.allows()).toBe(false);
    b.stop();
  });

  it('probes after openMs; a failed probe opens it again, a good one closes it', async () => {
    vi.useFakeTimers();
    let answer = false;
    const probe = vi.fn(() =>
      answer ? Promise.resolve('PONG') : Promise.reject(new Error('down')),
    );
    const { b, changes } = breaker(probe, 1);
    b.failure();
    expect(b.state).toBe('open');
    // Calls while open or half-open change nothing: only the probe decides.
    b.success();
    expect(b.state).toBe('open');
    await vi.advanceTimersByTimeAsync(999);
    expect(probe).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    expect(probe).toHaveBeenCalledTimes(1);
    expect(b.state).toBe('open');
    answer = true;
    await vi.advanceTimersByTimeAsync(1000);
    expect(probe).toHaveBeenCalledTimes(2);
    expect(b.state).toBe('closed');
    expect(changes).toEqual(['open', 'half-open', 'open', 'half-open', 'closed']);
    // Closed again, it counts from zero.
    b.failure();
    expect(b.state).toBe('open');
    b.stop();
  });

  it('probeNow skips the rest of the open period; stop() ends the probing', async () => {
    vi.useFakeTimers();
    const probe = vi.fn(() => Promise.reject(new Error('down')));
    const { b } = breaker(probe, 1);
    b.failure();
    b.probeNow();
    expect(probe).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(0);
    expect(b.state).toBe('open');
    b.stop();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(probe).toHaveBeenCalledTimes(1);
  });

  it('a probe that throws synchronously counts as a failed probe', async () => {
    vi.useFakeTimers();
    const { b } = breaker(() => {
      throw new Error('boom');
    }, 1);
    b.failure();
    await vi.advanceTimersByTimeAsync(1000);
    expect(b.state).toBe('open');
    b.stop();
  });
});
