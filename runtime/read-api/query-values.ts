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
  return Number.isNaN(ms) ? undefined : new Date(ms).toISOString();
}
