// Equality of two values as JSON would store them: properties whose value is
// `undefined` count as absent, as JSON.stringify drops them. The same answer as
// comparing two JSON round trips, without serialising and parsing both sides.

export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) {
    return false;
  }
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && arraysEqual(a, b);
  }
  return objectsEqual(a as Record<string, unknown>, b as Record<string, unknown>);
}

function arraysEqual(a: unknown[], b: unknown[]): boolean {
  if (a.length !== b.length) return false;
  // JSON.stringify writes an undefined array element as null.
  for (let i = 0; i < a.length; i++) if (!jsonEqual(a[i] ?? null, b[i] ?? null)) return false;
  return true;
}

function objectsEqual(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  let defined = 0;
  for (const key in a) {
    if (!Object.hasOwn(a, key) || a[key] === undefined) continue;
    defined++;
    if (!Object.hasOwn(b, key) || !jsonEqual(a[key], b[key])) return false;
  }
  for (const key in b) {
    if (Object.hasOwn(b, key) && b[key] !== undefined) defined--;
  }
  return defined === 0;
}
