// What a list (not a watch) reads, from `resourceVersion`, `resourceVersionMatch`,
// `continue` and `limit`, with the API server's checks and its errors
// (kubernetes.io "API Concepts" § Semantics for get and list; sources per function):
//
// | resourceVersion | match        | limit | served                                             |
// | --------------- | ------------ | ----- | -------------------------------------------------- |
// | unset           |              | any   | the newest state (a consistent read), paged        |
// | "0"             | NotOlderThan | any   | the newest state, `limit` ignored (one page)       |
// | N               | NotOlderThan | none  | the newest state, once the server is at N          |
// | N               | NotOlderThan | n     | the newest state, once the server is at N, paged   |
// | N               | unset        | n     | as of N, paged (the legacy exact list)             |
// | N               | Exact        | any   | as of N, paged; 410 Expired when compacted away    |
// | unset or "0"    | unset        | any   | with `continue`: the token's snapshot ("0": whole) |
//
// An unset match reads as NotOlderThan except in the legacy row.
//
// A resourceVersion the server has not reached yet waits up to 3 s, then 504
// (freshness.ts).
import { decodeContinue, type ListRead } from './pagination.ts';
import { fe } from './schema/errors.ts';
import type { FieldError } from './schema/types.ts';
import { badRequest, invalid } from './status.ts';

const MATCHES = ['Exact', 'NotOlderThan'];

/**
 * The list branch of apimachinery pkg/apis/meta/internalversion/validation
 * ValidateListOptions (v0.35): 422 Invalid `ListOptions.meta.k8s.io "" is invalid: …`,
 * as endpoints/handlers/get.go ListResource answers it.
 */
function validateListOptions(q: URLSearchParams): void {
  const rv = q.get('resourceVersion') ?? '';
  const match = q.get('resourceVersionMatch') ?? '';
  const causes: FieldError[] = [];
  if (match) {
    const field = 'resourceVersionMatch';
    if (!rv)
      causes.push(
        fe.forbidden(field, 'resourceVersionMatch is forbidden unless resourceVersion is provided'),
      );
    if (q.get('continue'))
      causes.push(
        fe.forbidden(field, 'resourceVersionMatch is forbidden when continue is provided'),
      );
    if (!MATCHES.includes(match)) causes.push(fe.notSupported(field, match, [...MATCHES, '']));
    if (match === 'Exact' && rv === '0')
      causes.push(
        fe.forbidden(field, 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'),
      );
  }
  if (q.get('sendInitialEvents') !== null)
    causes.push(fe.forbidden('sendInitialEvents', 'sendInitialEvents is forbidden for list'));
  if (causes.length > 0) throw invalid({ group: 'meta.k8s.io', kind: 'ListOptions' }, '', causes);
}

const MAX_UINT64 = 18446744073709551615n;

/**
 * storage/api_object_versioner.go ParseResourceVersion ("" and "0" are 0, else
 * strconv.ParseUint), its error wrapped by storage.ValidateListOptions: 400
 * `invalid resource version: resourceVersion: Invalid value: "x": strconv.ParseUint:
 * parsing "x": invalid syntax`. (Go's %q; JSON quoting here, the same for printable text.)
 */
function parseResourceVersion(rv: string): bigint {
  if (rv === '' || rv === '0') return 0n;
  const n = /^[0-9]+$/.test(rv) ? BigInt(rv) : undefined;
  if (n !== undefined && n <= MAX_UINT64) return n;
  const quoted = JSON.stringify(rv);
  const why = n === undefined ? 'invalid syntax' : 'value out of range';
  throw badRequest(
    `invalid resource version: resourceVersion: Invalid value: ${quoted}: strconv.ParseUint: parsing ${quoted}: ${why}`,
  );
}

/**
 * storage/interfaces.go ValidateListOptions (400s: a bad continue token, a
 * resourceVersion other than "0" with one, a resourceVersion that is no uint64), then
 * where the cacher reads from (cacher/delegator/interface.go ShouldDelegateList,
 * watch_cache.go waitUntilFreshAndList; computeListLimit ignores `limit` for RV "0").
 */
function readFor(q: URLSearchParams): ListRead {
  const rv = q.get('resourceVersion') ?? '';
  const match = q.get('resourceVersionMatch') ?? '';
  const requested = Number(q.get('limit') ?? 0);
  const limit = rv === '0' || !(requested > 0) ? 0 : requested;
  const token = q.get('continue');
  if (token) {
    const t = decodeContinue(token);
    if (rv !== '' && rv !== '0')
      throw badRequest('specifying resource version is not allowed when using continue');
    // A token from the future waits like an Exact list (cacher.go shouldDelegateExactRV).
    if (t.rv > 0)
      return { minRv: BigInt(t.rv), exactRv: t.rv, limit, start: t.start, continued: true };
    // rv -1: a token handed out with a 410, going on at the newest state.
    return { minRv: 0n, limit, start: t.start, continued: true };
  }
  const minRv = parseResourceVersion(rv);
  const exact = minRv > 0n && (match === 'Exact' || (match === '' && limit > 0));
  return {
    minRv,
    ...(exact ? { exactRv: Number(minRv) } : {}),
    limit,
    start: '',
    continued: false,
  };
}

/** A list's ListRead, or the 422/400 the API server answers its options with. */
export function listRead(q: URLSearchParams): ListRead {
  validateListOptions(q);
  return readFor(q);
}
