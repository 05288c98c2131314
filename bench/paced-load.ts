// An open-loop load at an even pace: `node bench/paced-load.ts <url> <req/s> <seconds>
// [headers JSON] [body]` sends request i at i/rate seconds after the start, whatever
// the answers before it did, on a pool of keep-alive connections, and prints one JSON
// line: { total, non2xx, errors, queued, rps, p50, p99 } (latencies in ms).
//
// Why not autocannon's `-R` (bench/run.ts uses both, bench/README.md 2026-11-28 night):
// autocannon is closed-loop. Each of its connections sends its share of a second's
// requests back to back at the second's start, so "2,000 req/s over 50 connections" is
// a burst of 50 concurrent requests until 2,000 are answered, then silence. A server
// faster than autocannon keeps it busy; a slower one leaves it waiting, and then each
// answer's socket write also pays for waking the load generator's idle core (in this
// VM an interprocessor interrupt: `perf` put 15 µs of each of the embedded server's
// requests in `sock_def_readable` against 2 µs for bare Fastify's). Paced, every target
// meets the same arrivals: about two requests each millisecond at 2,000 req/s (Node's
// timers tick by the millisecond), each answered before the next pair comes.
//
// `queued` counts requests sent while every connection was busy (they wait in the
// pool): a pace the server (or this process) could not keep for about 128 ms at 2,000
// req/s (the machine's usual stalls of 10-30 ms, under bare Fastify too, stay below it;
// a stall's requests go out together when it ends). bench/run.ts reports its share
// beside the CPU figures.
import { Pool } from 'undici';

/**
 * Connections the pool may open: far more than a paced load keeps busy at once. At
 * 2,000 req/s they run out when nothing is answered for 128 ms.
 */
const CONNECTIONS = 256;

export interface PacedResult {
  total: number;
  non2xx: number;
  errors: number;
  queued: number;
  rps: number;
  p50: number;
  p99: number;
}

export async function pacedLoad(
  url: string,
  rate: number,
  seconds: number,
  headers: Record<string, string>,
  body: string,
): Promise<PacedResult> {
  const target = new URL(url);
  const pool = new Pool(target.origin, { connections: CONNECTIONS, pipelining: 1 });
  const path = target.pathname + target.search;
  const count = Math.round(rate * seconds);
  const latencies: number[] = [];
  const result = { total: 0, non2xx: 0, errors: 0, queued: 0 };
  let inFlight = 0;
  const send = async () => {
    if (inFlight >= CONNECTIONS) result.queued++;
    inFlight++;
    const sent = performance.now();
    try {
      const answer = await pool.request({ path, method: 'POST', headers, body });
      await answer.body.dump();
      latencies.push(performance.now() - sent);
      result.total++;
      if (answer.statusCode < 200 || answer.statusCode > 299) result.non2xx++;
    } catch {
      result.errors++;
    } finally {
      inFlight--;
    }
  };
  const pending: Promise<void>[] = [];
  const start = performance.now();
  await new Promise<void>((resolve) => {
    const tick = () => {
      // Every request due by now (a timer fires late, never early): the pace holds on
      // average even when a tick comes a millisecond late.
      const due = Math.min(count, Math.floor(((performance.now() - start) * rate) / 1000));
      while (pending.length < due) pending.push(send());
      if (pending.length < count) setTimeout(tick, 1);
      else resolve();
    };
    tick();
  });
  await Promise.all(pending);
  const elapsed = (performance.now() - start) / 1000;
  await pool.close();
  const answered = latencies.sort((a, b) => a - b);
  const quantile = (q: number) =>
    answered[Math.min(answered.length - 1, Math.floor(q * answered.length))] ?? Number.NaN;
  return {
    ...result,
    rps: result.total / elapsed,
    p50: Number(quantile(0.5).toFixed(2)),
    p99: Number(quantile(0.99).toFixed(2)),
  };
}

if (import.meta.main) {
  const [url, rate, seconds, headers = '{}', body = '{}'] = process.argv.slice(2);
  if (!url || !rate || !seconds) {
    console.error('usage: node bench/paced-load.ts <url> <req/s> <seconds> [headers JSON] [body]');
    process.exit(2);
  }
  const result = await pacedLoad(
    url,
    Number(rate),
    Number(seconds),
    { 'content-type': 'application/json', ...(JSON.parse(headers) as Record<string, string>) },
    body,
  );
  console.log(JSON.stringify(result));
}
