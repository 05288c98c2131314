// Durations as the API writes them: `30s`, `5m`, `1h`, and inside workflows `250ms`.
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Milliseconds of a duration string; throws on anything else. */
export function parseDuration(text: string): number {
  const m = /^(\d+)(ms|s|m|h)$/.exec(text.trim());
  if (!m) throw new Error(`invalid duration "${text}"`);
  return Number(m[1]) * (UNIT_MS[m[2] as string] as number);
}
