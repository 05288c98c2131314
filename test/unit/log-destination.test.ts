// The role logger's destination (roles/log-destination.ts) over a FIFO this process
// reads, or does not: every line arrives whole and in order or is counted as dropped;
// what waits is bounded; a flush gives up on a stdout that takes nothing.
import { closeSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { LogDestination } from '../../roles/log-destination.ts';
import { registerLogMetrics } from '../../roles/logger.ts';
import { eventually } from '../support/eventually.ts';
import { openFifo, type Fifo } from '../support/fifo.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const opened: { fifo: Fifo; out: LogDestination }[] = [];
afterEach(() => {
  for (const { fifo, out } of opened.splice(0)) {
    // The reader first: the destination's next write fails (EPIPE) and drops what still
    // waits, so that its timer never writes to the closed descriptor's number, which
    // the next test's FIFO may have been given.
    fifo.close();
    out.flushSync();
    closeSync(fifo.writer);
  }
});

function destination(
  options: { maxBufferedBytes?: number; stallMs?: number; syncFlushMs?: number } = {},
) {
  const fifo = openFifo({ nonBlockingWriter: true });
  const dropped: number[] = [];
  const out = new LogDestination({ fd: fifo.writer, ...options });
  opened.push({ fifo, out });
  out.onDropped = ({ lines }) => {
    dropped.push(lines);
    out.write(`dropped ${lines}\n`);
  };
  return { fifo, out, dropped };
}

/** A numbered line of about 100 bytes. */
const line = (n: number) => `${JSON.stringify({ n, pad: 'x'.repeat(80) })}\n`;

describe('LogDestination', () => {
  it('a stdout that takes nothing: what waits stays under the bound, the rest is dropped, counted once lines get through', async () => {
    const { fifo, out, dropped } = destination({ maxBufferedBytes: 16 * 1024 });
    const total = 3_000; // about 300 KB: the FIFO's 64 KiB, 16 KiB waiting, the rest dropped
    for (let n = 0; n < total; n++) out.write(line(n));
    expect(out.waitingBytes).toBeGreaterThan(0);
    expect(out.waitingBytes).toBeLessThanOrEqual(16 * 1024 + line(total).length);
    expect(dropped).toEqual([]);

    let read = '';
    await eventually(() => {
      read += fifo.readNow();
      expect(read).toMatch(/dropped \d+\n$/);
    });
    const lines = read.trimEnd().split('\n');
    const report = lines.pop();
    const numbers = lines.map((l) => (JSON.parse(l) as { n: number }).n);
    // Whole lines, in order, the first ones; the report counts exactly the others.
    expect(numbers).toEqual(numbers.map((_, i) => i));
    expect(dropped).toEqual([total - numbers.length]);
    expect(report).toBe(`dropped ${total - numbers.length}`);
    expect(out.waitingBytes).toBe(0);
    // The totals since the start (what /metrics reads): the same lines, and their bytes.
    let bytes = 0;
    for (let n = numbers.length; n < total; n++) bytes += line(n).length;
    expect(out.dropped).toEqual({
      buffer_full: { lines: total - numbers.length, bytes },
      write_error: { lines: 0, bytes: 0 },
    });
  });

  it('counts the lines and bytes a gone reader (EPIPE) did not take, apart from those over the bound', () => {
    const { fifo, out } = destination({ maxBufferedBytes: 16 * 1024 });
    for (let n = 0; n < 1_000; n++) out.write(line(n));
    const full = { ...out.dropped.buffer_full };
    expect(full.lines).toBeGreaterThan(0);
    const waiting = out.waitingBytes;
    // The lines that wait: those neither in the FIFO whole nor dropped (the first of
    // them maybe a line's rest).
    const whole = fifo.readNow().split('\n').length - 1;
    const waitingLines = 1_000 - full.lines - whole;
    fifo.close();
    out.flushSync();
    out.write(line(1_000));
    // What waited goes at the first failed write; a line after it on its own.
    expect(out.dropped.buffer_full).toEqual(full);
    expect(out.dropped.write_error).toEqual({
      lines: waitingLines + 1,
      bytes: waiting + line(1_000).length,
    });
    expect(out.waitingBytes).toBe(0);
  });

  it('on /metrics: both counters, by reason, at 0 from the start', async () => {
    const { fifo, out } = destination({ maxBufferedBytes: 16 * 1024 });
    const registry = new Registry();
    registerLogMetrics(registry, out);
    const samples = async () =>
      (await registry.metrics()).split('\n').filter((l) => l.startsWith('hookgate_log_'));
    expect(await samples()).toEqual([
      'hookgate_log_lines_dropped_total{reason="buffer_full"} 0',
      'hookgate_log_lines_dropped_total{reason="write_error"} 0',
      'hookgate_log_bytes_dropped_total{reason="buffer_full"} 0',
      'hookgate_log_bytes_dropped_total{reason="write_error"} 0',
    ]);
    for (let n = 0; n < 1_000; n++) out.write(line(n));
    const { lines, bytes } = out.dropped.buffer_full;
    expect(lines).toBeGreaterThan(0);
    expect(await samples()).toEqual([
      `hookgate_log_lines_dropped_total{reason="buffer_full"} ${lines}`,
      'hookgate_log_lines_dropped_total{reason="write_error"} 0',
      `hookgate_log_bytes_dropped_total{reason="buffer_full"} ${bytes}`,
      'hookgate_log_bytes_dropped_total{reason="write_error"} 0',
    ]);
    fifo.readNow();
  });

  it('what waits holds about its bound in memory, whatever else shares Node’s Buffer pool meanwhile', async () => {
    // A short Buffer.from(string) is a slice of an 8 KiB slab that Node shares between
    // every small allocation: a kept line that is such a slice holds its whole slab. With
    // other small allocations between two lines (any busy process), each kept line of
    // about 100 bytes held a slab of its own: 4 MiB of lines, hundreds of MiB of memory.
    const bound = 256 * 1024;
    const { fifo, out } = destination({ maxBufferedBytes: bound });
    const elsewhere: number[] = [];
    gc();
    const before = process.memoryUsage().arrayBuffers;
    for (let n = 0; n < 5_000; n++) {
      out.write(line(n));
      for (let i = 0; i < 3; i++) elsewhere.push(Buffer.from('y'.repeat(3_000)).length);
    }
    const waiting = out.waitingBytes;
    // Freed buffers leave the count once V8's background sweeper has run.
    gc();
    await new Promise((resolve) => setTimeout(resolve, 20));
    gc();
    const held = process.memoryUsage().arrayBuffers - before;
    // Read it all first, so that nothing is left to write once the FIFO is closed.
    await eventually(() => {
      fifo.readNow();
      expect(out.waitingBytes).toBe(0);
    });
    expect(waiting).toBeGreaterThan(bound / 2);
    expect(waiting).toBeLessThanOrEqual(bound);
    expect(held).toBeLessThan(4 * bound);
  });

  it('flush calls back at once when nothing waits, and once all is written after a pause', async () => {
    const { fifo, out } = destination();
    await new Promise<void>((resolve) => out.flush(() => resolve()));
    for (let n = 0; n < 1_000; n++) out.write(line(n));
    expect(out.waitingBytes).toBeGreaterThan(0);
    let flushed = false;
    out.flush(() => (flushed = true));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(flushed).toBe(false);
    let read = '';
    await eventually(() => {
      read += fifo.readNow();
      expect(flushed).toBe(true);
    });
    read += fifo.readNow();
    expect(read.trimEnd().split('\n')).toHaveLength(1_000);
  });

  it('flush and flushSync give up on a stdout that has taken nothing for stallMs', async () => {
    const { out } = destination({ stallMs: 300 });
    for (let n = 0; n < 1_000; n++) out.write(line(n));
    let started = Date.now();
    out.flushSync();
    expect(Date.now() - started).toBeGreaterThanOrEqual(200);
    expect(Date.now() - started).toBeLessThan(1_000);
    // Stalled already: no more waiting.
    started = Date.now();
    await new Promise<void>((resolve) => out.flush(() => resolve()));
    out.flushSync();
    expect(Date.now() - started).toBeLessThan(100);
    expect(out.waitingBytes).toBeGreaterThan(0);
  });

  it('flushSync holds the process for syncFlushMs at most', () => {
    const { out } = destination({ stallMs: 10_000, syncFlushMs: 200 });
    for (let n = 0; n < 1_000; n++) out.write(line(n));
    const started = Date.now();
    out.flushSync();
    expect(Date.now() - started).toBeGreaterThanOrEqual(150);
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(out.waitingBytes).toBeGreaterThan(0);
  });

  it('flushSync ends by its deadline: the last sleep is cut to what is left of syncFlushMs', () => {
    // A virtual monotonic clock: each 10 ms sleep between two tries advances it by what
    // it was asked to sleep, so the test sees exactly when flushSync would return.
    let now = 1_000;
    const sleeps: number[] = [];
    const clock = vi.spyOn(performance, 'now').mockImplementation(() => now);
    const sleep = vi
      .spyOn(Atomics, 'wait')
      .mockImplementation((_array: unknown, _index: number, _value: unknown, ms?: number) => {
        sleeps.push(ms ?? Infinity);
        now += ms ?? 0;
        return 'timed-out';
      });
    try {
      const { out } = destination({ stallMs: 10_000, syncFlushMs: 25 });
      for (let n = 0; n < 1_000; n++) out.write(line(n));
      expect(out.waitingBytes).toBeGreaterThan(0);
      const started = now;
      out.flushSync();
      // The forced exit's write comes after the 25 s grace period, and the chart gives
      // it syncFlushMs (in whole seconds) before the kubelet's SIGKILL: not a ms more.
      expect(now - started).toBeLessThanOrEqual(25);
      expect(sleeps).toEqual([10, 10, 5]);
      expect(out.waitingBytes).toBeGreaterThan(0);
    } finally {
      clock.mockRestore();
      sleep.mockRestore();
    }
  });

  it('a reader that is gone (EPIPE): lines are dropped without an error', () => {
    const { fifo, out, dropped } = destination();
    fifo.close();
    expect(() => {
      for (let n = 0; n < 10; n++) out.write(line(n));
      out.flushSync();
    }).not.toThrow();
    expect(out.waitingBytes).toBe(0);
    expect(dropped).toEqual([]);
  });
});
