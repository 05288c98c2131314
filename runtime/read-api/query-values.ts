// Values of the read API's query parameters, read strictly: `Number()` takes `1e2`,
// `0x10`, ` 5` and `Date.parse()` takes `1` or `May 5`, so a typo was served as some
// other question instead of a 400 saying what is expected.

/** A plain decimal integer from `min` to `max` (no sign, exponent, hex or spaces). */
export function decimalInRange(raw: string, min: number, max: number): number | undefined {
  if (!/^[0-9]{1,9}$/.test(raw)) return undefined;
  const n = Number(raw);
  return n >= min && n <= max ? n : undefined;
}

const RFC_3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:[Zz]|[+-]\d{2}:\d{2})$/;

/** An RFC 3339 timestamp as ISO 8601 in UTC, or undefined. */
export function rfc3339(raw: string): string | undefined {
  if (!RFC_3339.test(raw)) return undefined;
  const ms = Date.parse(raw.replace(' ', 'T'));
  if (Number.isNaN(ms) || !realDate(raw)) return undefined;
  return new Date(ms).toISOString();
}

/**
 * Whether the calendar date and time of day exist: Date.parse rolls 2026-02-30 over to
 * March 2nd and T24:00:00 to the next day.
 */
function realDate(raw: string): boolean {
  const [y, m, d, h, min, s] = [0, 5, 8, 11, 14, 17].map((at, i) =>
    Number(raw.slice(at, at + (i === 0 ? 4 : 2))),
  ) as [number, number, number, number, number, number];
  const day = new Date(Date.UTC(y, m - 1, d));
  return day.getUTCMonth() === m - 1 && day.getUTCDate() === d && h < 24 && min < 60 && s < 60;
}
