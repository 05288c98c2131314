// Small helpers for reading request headers as Node hands them over.

/** Request headers as Node (and Fastify) give them: lower-case names, repeated ones as arrays. */
export type HeaderMap = Record<string, string | string[] | undefined>;

/**
 * One header's value, looked up case-insensitively. Node lower-cases incoming names,
 * but callers may pass hand-built maps, so an exact-case miss falls back to a scan.
 * Repeated headers (arrays) are joined with ", " the way Node joins unknown headers.
 * Own properties only: Node's header map is a plain object, and a configured name
 * such as `constructor` or `toString` (a valid HTTP token) would read Object's method.
 */
export function headerValue(headers: HeaderMap, name: string): string | undefined {
  const lower = name.toLowerCase();
  let value = Object.hasOwn(headers, lower) ? headers[lower] : undefined;
  if (value === undefined) {
    for (const [key, candidate] of Object.entries(headers)) {
      if (key.toLowerCase() === lower) {
        value = candidate;
        break;
      }
    }
  }
  if (value === undefined) return undefined;
  return Array.isArray(value) ? value.join(', ') : value;
}
