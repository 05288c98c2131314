// Where an Async Callback caller puts its callback URL, and keeping that URL out of
// what others see: the stored request, the workflow's input and the live event stream
// read [redacted] there (docs/callbacks.md). The URL often carries the receiver's
// token; the engine delivers from the start request, which nothing stores.
import type { RouteRecord } from '../../api/records/records.ts';

export const CALLBACK_HEADER = 'x-callback-url';
export const CALLBACK_QUERY = 'callbackUrl';
const REDACTED = '[redacted]';

const takesCallback = (route: RouteRecord): boolean => route.spec.response.mode === 'asyncCallback';

/** Headers (already redacted of credentials) and the parsed query if given, in place. */
export function redactCallbackUrl(
  route: RouteRecord,
  headers: Record<string, string>,
  query?: Record<string, string | string[]>,
): void {
  if (!takesCallback(route)) return;
  if (headers[CALLBACK_HEADER] !== undefined) headers[CALLBACK_HEADER] = REDACTED;
  if (query?.[CALLBACK_QUERY] !== undefined) query[CALLBACK_QUERY] = REDACTED;
}

/** The raw query string as shown on the live stream. */
export function redactCallbackQuery(route: RouteRecord, query: string): string {
  if (!takesCallback(route) || !query.includes(CALLBACK_QUERY)) return query;
  const params = new URLSearchParams(query);
  if (!params.has(CALLBACK_QUERY)) return query;
  params.set(CALLBACK_QUERY, REDACTED);
  return params.toString();
}
