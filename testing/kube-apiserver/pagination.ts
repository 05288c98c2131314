// K17 with `limit`/`continue`: pages of one consistent snapshot. The snapshot at the
// first page's RV is rebuilt from the history window, so a token whose RV has left
// the window gets 410 Expired, as after an etcd compaction.
import type { KubeObject } from './resources.ts';
import { ApiError, badRequest } from './status.ts';
import type { Storage } from './storage.ts';

interface Token {
  v: 'meta.k8s.io/v1';
  rv: number;
  /** namespace/name of the last item returned. */
  start: string;
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

function decode(token: string): Token {
  try {
    const t = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as Partial<Token>;
    if (t.v !== 'meta.k8s.io/v1' || typeof t.rv !== 'number' || typeof t.start !== 'string') {
      throw new Error('bad token');
    }
    return t as Token;
  } catch {
    throw badRequest(
      'continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)',
    );
  }
}

function encode(token: Token): string {
  return Buffer.from(JSON.stringify(token)).toString('base64url');
}

const EXPIRED_CONTINUE =
  'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.';

/**
 * One page of a list; without limit and continue: everything, at the current RV.
 * `read` is what reading from storage does to an object (codec.ts); selectors see
 * its result, as the watch cache holds decoded objects.
 */
export function listPage(
  storage: Storage,
  resource: string,
  namespace: string | undefined,
  read: (o: KubeObject) => KubeObject,
  select: (o: KubeObject) => boolean,
  limit: number,
  continueToken: string | null,
): Page {
  let rv = storage.currentRv();
  let start = '';
  let objects: KubeObject[];
  if (continueToken) {
    const token = decode(continueToken);
    const past = storage.listAt(resource, token.rv, namespace);
    if (past === 'expired') {
      throw new ApiError({
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: EXPIRED_CONTINUE,
        reason: 'Expired',
        code: 410,
      });
    }
    rv = token.rv;
    start = token.start;
    objects = past;
  } else objects = storage.list(resource, namespace);
  const selected = objects
    .filter((o) => keyOf(o) > start)
    .map(read)
    .filter(select);
  if (!(limit > 0) || selected.length <= limit) return { items: selected, rv };
  const items = selected.slice(0, limit);
  const last = items[items.length - 1];
  return {
    items,
    rv,
    continue: encode({ v: 'meta.k8s.io/v1', rv, start: last ? keyOf(last) : start }),
    remainingItemCount: selected.length - limit,
  };
}
