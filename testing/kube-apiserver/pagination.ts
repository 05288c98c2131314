// One page of a list (K17), read as its ListRead (list-options.ts) says: the newest
// state, or the state as of one resourceVersion (Exact, a legacy exact list, a
// continue token), rebuilt from the history window. An RV that has left the window
// gets 410 Expired, as after an etcd compaction (apiserver storage/etcd3/errors.go
// interpretListError). `limit`/`continue` page one consistent snapshot.
import path from 'node:path';
import type { KubeObject } from './resources.ts';
import { badRequest, resourceExpired } from './status.ts';
import type { Storage } from './storage.ts';

/** storage/continue.go continueToken: `{"v":"meta.k8s.io/v1","rv":N,"start":key}`. */
export interface ContinueToken {
  v: 'meta.k8s.io/v1';
  /** The snapshot's RV; -1: continue at the newest state (handed out after a 410). */
  rv: number;
  /** namespace/name of the last item returned. */
  start: string;
}

/** How a list reads storage (list-options.ts builds it from the query). */
export interface ListRead {
  /** Wait until the server has reached this RV (0n: no wait). */
  minRv: bigint;
  /** Serve the state as of this RV; undefined: the newest state. */
  exactRv?: number;
  /** Page size; 0: everything. */
  limit: number;
  /** Items after this key (namespace/name) only: the continue token's position. */
  start: string;
  /** Read from a continue token (its 410 hands out a token for the newest state). */
  continued: boolean;
}

export interface Page {
  items: KubeObject[];
  rv: number;
  continue?: string;
  remainingItemCount?: number;
}

function keyOf(o: KubeObject): string {
  return `${o.metadata.namespace ?? ''}/${o.metadata.name ?? ''}`;
}

/** An invalid token is 400 `invalid continue token: <DecodeContinue's error>`. */
function invalidToken(why: string): Error {
  return badRequest(`invalid continue token: continue key is not valid${why ? `: ${why}` : ''}`);
}

/**
 * Go's base64.RawURLEncoding.DecodeString: URL alphabet, no padding; otherwise
 * `illegal base64 data at input byte N`.
 */
function decodeBase64Url(text: string): string {
  const bad = text.search(/[^A-Za-z0-9_-]/);
  if (bad >= 0) throw invalidToken(`illegal base64 data at input byte ${bad}`);
  if (text.length % 4 === 1)
    throw invalidToken(`illegal base64 data at input byte ${text.length - 1}`);
  return Buffer.from(text, 'base64url').toString('utf8');
}

/** path.Clean of an absolute path (no trailing slash except the root). */
function cleanPath(p: string): string {
  const n = path.posix.normalize(p);
  return n.length > 1 && n.endsWith('/') ? n.slice(0, -1) : n;
}

/** encoding/json's type error for a token field, or for a token that is no object. */
function typeError(value: unknown, field?: string, goType?: string): Error {
  const kind = Array.isArray(value)
    ? 'array'
    : typeof value === 'boolean'
      ? 'bool'
      : typeof value === 'number'
        ? `number ${value}`
        : typeof value;
  return invalidToken(
    field
      ? `json: cannot unmarshal ${kind} into Go struct field continueToken.${field} of type ${goType ?? ''}`
      : `json: cannot unmarshal ${kind} into Go value of type storage.continueToken`,
  );
}

/** The token's fields as encoding/json would fill the struct (null leaves a zero value). */
function tokenFields(raw: unknown): { v: string; rv: number; start: string } {
  if (raw === null) return { v: '', rv: 0, start: '' };
  if (typeof raw !== 'object' || Array.isArray(raw)) throw typeError(raw);
  const t = raw as Record<string, unknown>;
  const { v = '', rv = 0, start = '' } = t;
  if (typeof v !== 'string' && v !== null) throw typeError(v, 'v', 'string');
  if ((typeof rv !== 'number' || !Number.isInteger(rv)) && rv !== null)
    throw typeError(rv, 'rv', 'int64');
  if (typeof start !== 'string' && start !== null) throw typeError(start, 'start', 'string');
  return { v: v ?? '', rv: rv ?? 0, start: start ?? '' };
}

/**
 * storage/continue.go DecodeContinue, with its errors worded as they are; only a
 * JSON syntax error carries Node's reason where the server has encoding/json's.
 */
export function decodeContinue(text: string): ContinueToken {
  const json = decodeBase64Url(text);
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch (err) {
    throw invalidToken((err as Error).message);
  }
  const { v, rv, start } = tokenFields(raw);
  if (v !== 'meta.k8s.io/v1')
    throw invalidToken(`server does not recognize this encoded version ${v}`);
  if (rv === 0)
    throw invalidToken('incorrect encoded start resourceVersion (version meta.k8s.io/v1)');
  if (start === '') throw invalidToken('encoded start key empty (version meta.k8s.io/v1)');
  // Path traversal guard: the start key must already be clean.
  const key = start.startsWith('/') ? start : `/${start}`;
  if (cleanPath(key) !== key) throw invalidToken(start);
  return { v, rv, start };
}

function encode(token: ContinueToken): string {
  return Buffer.from(JSON.stringify(token)).toString('base64url');
}

const EXPIRED_LIST = 'The resourceVersion for the provided list is too old.';
const EXPIRED_CONTINUE =
  'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.';

/**
 * The objects `read` asks for and the RV they are at: the newest state, or the state
 * at `read.exactRv` (410 Expired when the window no longer reaches back that far; for
 * a continue token, with a token to go on at the newest state, rv -1, as
 * etcd3/errors.go handleCompactedErrorForPaging hands out).
 */
function snapshot(
  storage: Storage,
  resource: string,
  namespace: string | undefined,
  read: ListRead,
): { objects: KubeObject[]; rv: number } {
  if (read.exactRv === undefined)
    return { objects: storage.list(resource, namespace), rv: storage.currentRv() };
  const past = storage.listAt(resource, read.exactRv, namespace);
  if (past !== 'expired') return { objects: past, rv: read.exactRv };
  if (!read.continued) throw resourceExpired(EXPIRED_LIST);
  throw resourceExpired(EXPIRED_CONTINUE, {
    continue: encode({ v: 'meta.k8s.io/v1', rv: -1, start: read.start }),
  });
}

/**
 * One page of a list. `decodeObject` is what reading from storage does to an object
 * (codec.ts); selectors see its result, as the watch cache holds decoded objects.
 */
export function listPage(
  storage: Storage,
  resource: string,
  namespace: string | undefined,
  decodeObject: (o: KubeObject) => KubeObject,
  select: (o: KubeObject) => boolean,
  read: ListRead,
): Page {
  const { objects, rv } = snapshot(storage, resource, namespace, read);
  const selected = objects
    .filter((o) => keyOf(o) > read.start)
    .map(decodeObject)
    .filter(select);
  const limit = read.limit;
  if (!(limit > 0) || selected.length <= limit) return { items: selected, rv };
  const items = selected.slice(0, limit);
  const last = items[items.length - 1];
  return {
    items,
    rv,
    continue: encode({ v: 'meta.k8s.io/v1', rv, start: last ? keyOf(last) : read.start }),
    remainingItemCount: selected.length - limit,
  };
}
