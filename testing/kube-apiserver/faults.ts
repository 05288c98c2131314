// Fault switches for tests (E5): answer the next N matching requests with a forced
// error, delay them, or end every open watch stream.

export interface RequestFacts {
  method: string;
  path: string;
  query: URLSearchParams;
  /** True for `?watch=1|true` requests. */
  watch: boolean;
}

export type RequestPredicate = (r: RequestFacts) => boolean;

export interface FaultRule {
  match: RequestPredicate;
  remaining: number;
  /** Answer with this HTTP status (a Status body) instead of serving the request. */
  status?: number;
  /** For a watch: answer 200 and send the error as an ERROR event, then close. */
  asWatchEvent?: boolean;
  /** Wait this long before serving (or failing) the request. */
  delayMs?: number;
}

export class Faults {
  private rules: FaultRule[] = [];
  private readonly closers = new Set<() => void>();

  /** The next `count` requests matching `match` get `status` (409, 410, 500, ...). */
  failNext(
    count: number,
    status: number,
    match: RequestPredicate = () => true,
    opts: { asWatchEvent?: boolean } = {},
  ): void {
    this.rules.push({ match, remaining: count, status, ...opts });
  }

  /** The next `count` requests matching `match` wait `delayMs` first. */
  delayNext(count: number, delayMs: number, match: RequestPredicate = () => true): void {
    this.rules.push({ match, remaining: count, delayMs });
  }

  /** End every open watch stream (as a dropped connection would). Returns how many. */
  closeWatches(): number {
    const closers = [...this.closers];
    for (const close of closers) close();
    return closers.length;
  }

  openWatches(): number {
    return this.closers.size;
  }

  clear(): void {
    this.rules = [];
  }

  /** Used by the server: consume the rules matching one request. */
  take(facts: RequestFacts): { status?: number; asWatchEvent?: boolean; delayMs: number } {
    let delayMs = 0;
    let status: number | undefined;
    let asWatchEvent: boolean | undefined;
    for (const rule of this.rules) {
      if (rule.remaining <= 0 || !rule.match(facts)) continue;
      if (rule.status !== undefined && status !== undefined) continue;
      rule.remaining--;
      delayMs += rule.delayMs ?? 0;
      if (rule.status !== undefined) {
        status = rule.status;
        asWatchEvent = rule.asWatchEvent;
      }
    }
    this.rules = this.rules.filter((r) => r.remaining > 0);
    return {
      delayMs,
      ...(status !== undefined ? { status } : {}),
      ...(asWatchEvent ? { asWatchEvent } : {}),
    };
  }

  /** Used by watch streams: register a closer; returns the unregister function. */
  track(close: () => void): () => void {
    this.closers.add(close);
    return () => this.closers.delete(close);
  }
}
