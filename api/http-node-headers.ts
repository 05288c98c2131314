// Request headers an http node may not set: the destination is the URL's host, checked
// by the outbound policy (a `Host` of its own would send the request to another
// virtual host of the same address: past a policy entry that names host names), and
// the message framing is the HTTP client's. undici sends a `Host` it is given; the
// framing headers it refuses at send time (a network error, retried) or sends as they
// are. Admission (workflow-check.ts) names such a header; the runtime's http node fails
// on one (a Workflow admitted before the rule).

/** Lower-case names of the request headers an http node may not set. */
export const FORBIDDEN_REQUEST_HEADERS: ReadonlySet<string> = new Set([
  'host',
  'content-length',
  'transfer-encoding',
  'keep-alive',
  'upgrade',
  'expect',
]);

/** Why an http node may not set the header `name`; undefined when it may. */
export function refusedRequestHeader(name: string): string | undefined {
  const lower = name.trim().toLowerCase();
  if (!FORBIDDEN_REQUEST_HEADERS.has(lower)) return undefined;
  return lower === 'host'
    ? 'the destination is the URL host (the outbound policy checks it); an http node may not set Host'
    : 'the HTTP client sets the message framing: an http node may not set this header';
}
