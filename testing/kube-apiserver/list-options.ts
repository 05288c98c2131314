// A list's or watch's query options, checked in the order of apiserver
// endpoints/handlers/get.go ListResource (v0.35): DecodeParameters (400: a
// timeoutSeconds or limit that is no int64, then the selectors, which the caller
// parses), SetListOptionsDefaults and ValidateListOptions (422 Invalid), the field
// label check (400, the caller's), then the storage's own checks: for a watch the
// resourceVersion parse (500), for a list storage.ValidateListOptions (400) and what
// it reads from `resourceVersion`, `resourceVersionMatch`, `continue` and `limit`
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
// (freshness.ts). What a watch sends is watch.ts's.
import { decodeContinue, type ListRead } from './pagination.ts';
import { fe } from './schema/errors.ts';
import type { FieldError } from './schema/types.ts';
import { badRequest, invalid, notAnApiStatus } from './status.ts';

/**
 * metainternalversion.ListOptions as endpoints/handlers/get.go ListResource holds it
 * after DecodeParameters, less the selectors (server.ts parses those).
 */
export interface ListOptions {
  watch: boolean;
  allowWatchBookmarks: boolean;
  resourceVersion: string;
  resourceVersionMatch: string;
  /** Go's *int64: undefined when the query has none. */
  timeoutSeconds?: bigint;
  limit: bigint;
  continue: string;
  /** Go's *bool: undefined when the query has none. */
  sendInitialEvents?: boolean;
}

/**
 * runtime/conversion.go Convert_Slice_string_To_bool (and _To_Pointer_bool): false
 * for "0" and for "false" in any case (strings.EqualFold, whose only other folding
 * here is ſ→s, as toUpperCase folds it), true for anything else, "" included.
 */
export function queryBool(value: string): boolean {
  return value !== '0' && value.toUpperCase() !== 'FALSE';
}

const MIN_INT64 = -(2n ** 63n);
const MAX_INT64 = 2n ** 63n - 1n;

/**
 * runtime/conversion.go string_to_int64 (strconv.ParseInt base 10); its error,
 * returned by DecodeParameters, is ListResource's 400 (`errors.NewBadRequest(err.Error())`).
 */
function parseInt64(s: string): bigint {
  const quoted = JSON.stringify(s);
  if (!/^[+-]?[0-9]+$/.test(s))
    throw badRequest(`strconv.ParseInt: parsing ${quoted}: invalid syntax`);
  const n = BigInt(s);
  if (n < MIN_INT64 || n > MAX_INT64)
    throw badRequest(`strconv.ParseInt: parsing ${quoted}: value out of range`);
  return n;
}

/**
 * apimachinery meta/v1 zz_generated.conversion.go autoConvert_url_Values_To_v1_ListOptions:
 * a parameter counts when present (its first value), in the struct's field order, so
 * a bad timeoutSeconds is reported before a bad limit. The selectors are parsed after
 * this (the v1 → internal conversion), by the caller.
 */
export function decodeListOptions(q: URLSearchParams): ListOptions {
  const get = (name: string): string | undefined => q.get(name) ?? undefined;
  const timeout = get('timeoutSeconds');
  const timeoutSeconds = timeout === undefined ? undefined : parseInt64(timeout);
  const limit = get('limit');
  const sendInitialEvents = get('sendInitialEvents');
  return {
    watch: queryBool(get('watch') ?? '0'),
    allowWatchBookmarks: queryBool(get('allowWatchBookmarks') ?? '0'),
    resourceVersion: get('resourceVersion') ?? '',
    resourceVersionMatch: get('resourceVersionMatch') ?? '',
    ...(timeoutSeconds !== undefined ? { timeoutSeconds } : {}),
    limit: limit === undefined ? 0n : parseInt64(limit),
    continue: get('continue') ?? '',
    ...(sendInitialEvents !== undefined ? { sendInitialEvents: queryBool(sendInitialEvents) } : {}),
  };
}

/**
 * meta/internalversion/defaults.go SetListOptionsDefaults, with the WatchList feature
 * on (Beta, on by default since 1.34, apiserver pkg/features/kube_features.go): a
 * watch from resourceVersion "" or "0" that sets neither sendInitialEvents nor
 * resourceVersionMatch becomes a watch-list (sendInitialEvents=true, NotOlderThan).
 */
function setListOptionsDefaults(o: ListOptions): ListOptions {
  if (o.sendInitialEvents !== undefined || o.resourceVersionMatch !== '') return o;
  if (o.watch && (o.resourceVersion === '' || o.resourceVersion === '0'))
    return { ...o, sendInitialEvents: true, resourceVersionMatch: 'NotOlderThan' };
  return o;
}

const MATCHES = ['Exact', 'NotOlderThan'];

/**
 * apimachinery pkg/apis/meta/internalversion/validation ValidateListOptions (v0.35,
 * WatchList on): the list branch, or validateWatchOptions for a watch. ListResource
 * answers it 422 Invalid `ListOptions.meta.k8s.io "" is invalid: …` (errors.NewInvalid),
 * after decoding and before the field label check.
 */
function validateListOptions(o: ListOptions): FieldError[] {
  const field = 'resourceVersionMatch';
  const match = o.resourceVersionMatch;
  const causes: FieldError[] = [];
  if (o.watch) {
    if (o.sendInitialEvents !== undefined && match !== 'NotOlderThan')
      causes.push(
        fe.forbidden(
          field,
          'sendInitialEvents requires setting resourceVersionMatch to NotOlderThan',
        ),
      );
    if (match) {
      if (o.sendInitialEvents === undefined)
        causes.push(
          fe.forbidden(
            field,
            'resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided',
          ),
        );
      if (match !== 'NotOlderThan') causes.push(fe.notSupported(field, match, ['NotOlderThan']));
      if (o.continue)
        causes.push(
          fe.forbidden(field, 'resourceVersionMatch is forbidden when continue is provided'),
        );
    }
    return causes;
  }
  if (match) {
    if (!o.resourceVersion)
      causes.push(
        fe.forbidden(field, 'resourceVersionMatch is forbidden unless resourceVersion is provided'),
      );
    if (o.continue)
      causes.push(
        fe.forbidden(field, 'resourceVersionMatch is forbidden when continue is provided'),
      );
    if (!MATCHES.includes(match)) causes.push(fe.notSupported(field, match, [...MATCHES, '']));
    if (match === 'Exact' && o.resourceVersion === '0')
      causes.push(
        fe.forbidden(field, 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'),
      );
  }
  if (o.sendInitialEvents !== undefined)
    causes.push(fe.forbidden('sendInitialEvents', 'sendInitialEvents is forbidden for list'));
  return causes;
}

/** ListResource's SetListOptionsDefaults then ValidateListOptions: the options, or the 422. */
export function checkListOptions(decoded: ListOptions): ListOptions {
  const o = setListOptionsDefaults(decoded);
  const causes = validateListOptions(o);
  if (causes.length > 0) throw invalid({ group: 'meta.k8s.io', kind: 'ListOptions' }, '', causes);
  return o;
}

const MAX_UINT64 = 18446744073709551615n;

/**
 * storage/api_object_versioner.go ParseResourceVersion ("" and "0" are 0, else
 * strconv.ParseUint): the number, or its storage.InvalidError's text
 * `resourceVersion: Invalid value: "x": strconv.ParseUint: parsing "x": invalid syntax`.
 * (Go's %q; JSON quoting here, the same for printable text.)
 */
function parseResourceVersion(rv: string): bigint | { error: string } {
  if (rv === '' || rv === '0') return 0n;
  const n = /^[0-9]+$/.test(rv) ? BigInt(rv) : undefined;
  if (n !== undefined && n <= MAX_UINT64) return n;
  const quoted = JSON.stringify(rv);
  const why = n === undefined ? 'invalid syntax' : 'value out of range';
  return {
    error: `resourceVersion: Invalid value: ${quoted}: strconv.ParseUint: parsing ${quoted}: ${why}`,
  };
}

/**
 * storage/interfaces.go ValidateListOptions (400s: a bad continue token, a
 * resourceVersion other than "0" with one, a resourceVersion that is no uint64, wrapped
 * `invalid resource version: …`), then where the cacher reads from
 * (cacher/delegator/interface.go ShouldDelegateList, watch_cache.go
 * waitUntilFreshAndList; computeListLimit ignores `limit` for RV "0").
 */
export function listRead(o: ListOptions): ListRead {
  const rv = o.resourceVersion;
  const match = o.resourceVersionMatch;
  const limit = rv === '0' || o.limit <= 0n ? 0 : Number(o.limit);
  if (o.continue) {
    const t = decodeContinue(o.continue);
    if (rv !== '' && rv !== '0')
      throw badRequest('specifying resource version is not allowed when using continue');
    // A token from the future waits like an Exact list (cacher.go shouldDelegateExactRV).
    if (t.rv > 0)
      return { minRv: BigInt(t.rv), exactRv: t.rv, limit, start: t.start, continued: true };
    // rv -1: a token handed out with a 410, going on at the newest state.
    return { minRv: 0n, limit, start: t.start, continued: true };
  }
  const minRv = parseResourceVersion(rv);
  if (typeof minRv !== 'bigint') throw badRequest(`invalid resource version: ${minRv.error}`);
  const exact = minRv > 0n && (match === 'Exact' || (match === '' && limit > 0));
  return {
    minRv,
    ...(exact ? { exactRv: Number(minRv) } : {}),
    limit,
    start: '',
    continued: false,
  };
}

/**
 * A watch's resourceVersion as the watch cache parses it (cacher.go Watch →
 * ParseResourceVersion; a watch does not go through storage.ValidateListOptions). Its
 * storage.InvalidError is no APIStatus, so the handler answers it as
 * responsewriters ErrorToAPIStatus answers any other error: 500, no reason
 * (kubernetes/kubernetes#101350, #139485).
 */
export function watchResourceVersion(o: ListOptions): bigint {
  const rv = parseResourceVersion(o.resourceVersion);
  if (typeof rv !== 'bigint') throw notAnApiStatus(rv.error);
  return rv;
}
