// What a span may say about URLs and paths (ADR 0040, amended 2026-11-28 (day)): the
// parts that may hold a secret (a path parameter's value, an outbound URL's path, where
// chat and bot webhooks put their token) are replaced by `REDACTED`, the word the
// OpenTelemetry semantic conventions use for a removed value, and text that reaches a
// span's status is bounded. No raw caller input or URL path reaches an exporter.
// Imports nothing: the port's callers and the adapter share it.

/** What stands for a removed part (OpenTelemetry's word for redacted values). */
export const REDACTED = 'REDACTED';

/** A span's status message, at most (a failure's message may be up to 2 KiB). */
export const MAX_STATUS_MESSAGE = 256;

const PARAMETER = /(?<=\/):[A-Za-z][A-Za-z0-9_]*/g;

/**
 * A request's `url.path`: its route template with each parameter's value `REDACTED`
 * (`/webhook/<wf>/notify/:id` → `/webhook/<wf>/notify/REDACTED`). Built from the
 * template, not the request: the other segments are the route's literals, so the
 * value is bounded by the routes deployed, whatever the caller sent.
 */
export function recordedPath(route: string): string {
  return route.replace(PARAMETER, REDACTED);
}

/**
 * An outbound request's `url.full`: scheme, host and port, and `/REDACTED` for any path
 * but `/`; no credentials, query or fragment. undefined when `url` does not parse.
 */
export function recordedUrl(url: string): string | undefined {
  const parsed = URL.parse(url);
  if (parsed === null) return undefined;
  const path = parsed.pathname === '/' || parsed.pathname === '' ? '/' : `/${REDACTED}`;
  return `${parsed.protocol}//${parsed.host}${path}`;
}

/** A URL in text, quoted ('…', as the outbound guard quotes one it cannot parse) or bare. */
const URL_IN_TEXT = /'[a-z][a-z0-9+.-]*:\/\/[^']*'|\b[a-z][a-z0-9+.-]*:\/\/[^\s'"<>`]*/gi;

/** A URL found in text, as a span says it: its origin (no user info), `/REDACTED` for a path. */
function shownInSpan(found: string): string {
  const quoted = found.startsWith("'");
  const text = quoted ? found.slice(1, -1) : found;
  const scheme = text.indexOf('://') + 3;
  const rest = text.slice(scheme);
  const end = rest.search(/[/?#\s]/);
  const authority = end === -1 ? rest : rest.slice(0, end);
  const host = authority.slice(authority.lastIndexOf('@') + 1);
  const after = end === -1 ? '' : rest.slice(end);
  const path = after === '' || after === '/' ? after : `/${REDACTED}`;
  const shown = `${text.slice(0, scheme)}${host}${path}`;
  return quoted ? `'${shown}'` : shown;
}

/**
 * A failure's message as a span's status says it: every URL in it as `shownInSpan`
 * (`node 'x' failed: POST https://hooks.example/REDACTED answered 503`), cut to
 * MAX_STATUS_MESSAGE characters.
 */
export function recordedMessage(message: string): string {
  const shown = message.replace(URL_IN_TEXT, shownInSpan);
  return shown.length > MAX_STATUS_MESSAGE ? `${shown.slice(0, MAX_STATUS_MESSAGE - 1)}…` : shown;
}
