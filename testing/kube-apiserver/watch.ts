// Watch streams (K11-K16): HTTP 200, chunked, one JSON event per line; initial ADDED
// events (sendInitialEvents=true, which SetListOptionsDefaults gives a watch from ""
// or "0"), none for sendInitialEvents=false, replay from the history window or a 410
// Expired ERROR event, filtered watches turning (un)matching objects into
// ADDED/DELETED, bookmarks (periodic, and one 2 s before a timeoutSeconds end), the
// end-of-initial-events bookmark (with allowWatchBookmarks), and timeoutSeconds. The request's options are checked before
// (list-options.ts).
import type { ServerResponse } from 'node:http';
import { withType } from './admission.ts';
import { fromStorage } from './codec.ts';
import { BLOCK_TIMEOUT_MS, TOO_HIGH_RETRY_SECONDS } from './freshness.ts';
import { apiVersionOf, storageKey, type KubeObject, type ResourceType } from './resources.ts';
import type { Selector } from './selectors.ts';
import { expired, tooLargeResourceVersion } from './status.ts';
import { toTable } from './table.ts';
import type { StoredEvent, Storage } from './storage.ts';

export interface WatchRequest {
  rt: ResourceType;
  namespace?: string;
  /** "" (unset) or "0", or the RV to go on after; a valid uint64 (list-options.ts). */
  resourceVersion: string;
  /** After SetListOptionsDefaults: undefined only for a watch from an RV N. */
  sendInitialEvents?: boolean;
  allowWatchBookmarks: boolean;
  timeoutSeconds?: number;
  labels: Selector;
  fields: Selector;
  /** `kubectl get -w`: each object is sent as a one-row meta.k8s.io/v1 Table. */
  table?: boolean;
}

export interface WatchOptions {
  bookmarkIntervalMs: number;
  /** Called with a function that ends the stream; returns an unregister function. */
  track(end: () => void): () => void;
}

type WatchEvent = { type: string; object: unknown };

/** A watch with a timeout gets a bookmark this long before it ends (cache_watcher.go). */
const PRE_TIMEOUT_BOOKMARK_S = 2;

/**
 * Translate a storage event for one filtered watch (K13); undefined: not for it. As the
 * watch cache does (apiserver storage/cacher/cache_watcher.go convertToWatchEvent): the
 * current object is tested unless the event is a deletion, the previous one whenever there
 * is one; passing now only → ADDED with the new object; both → MODIFIED; before only
 * (a deletion, or an object that stopped matching) → DELETED carrying the PREVIOUS object,
 * "with the event's resource version" (updateResourceVersion(oldObj, …, event.ResourceVersion)).
 */
export function translate(
  event: StoredEvent,
  key: string,
  matches: (o: KubeObject) => boolean,
): WatchEvent | undefined {
  if (event.resource !== key) return undefined;
  const now = event.type !== 'DELETED' && matches(event.object);
  // A deletion's `object` is its last state; storage always records `previous` for it.
  const prev = event.previous ?? (event.type === 'DELETED' ? event.object : undefined);
  const before = prev !== undefined && matches(prev);
  if (now && before) return { type: 'MODIFIED', object: event.object };
  if (now) return { type: 'ADDED', object: event.object };
  if (before && prev) {
    const old = structuredClone(prev);
    old.metadata.resourceVersion = String(event.rv);
    return { type: 'DELETED', object: old };
  }
  return undefined;
}

/**
 * Watches whose resourceVersion is ahead of the server (K12). A plain watch is
 * accepted and waits: the cacher takes the RV as is (cacher.go Watch,
 * getWatchCacheResourceVersion; watch_cache_history.go GetIntervalLocked refuses only
 * too old ones) and cache_watcher.go `process` sends "only events newer than
 * resourceVersion". A watch-list first waits for the watch cache to reach it
 * (cacher.go waitUntilWatchCacheFreshAndForceAllEvents → watch_cache.go
 * waitUntilFreshAndBlock), and after blockTimeout answers with an ERROR event
 * (newErrWatcher) carrying storage.NewTooLargeResourceVersionError: a 504 Timeout
 * Status `Timeout: Too large resource version: N, current: M` with a
 * ResourceVersionTooLarge cause and retryAfterSeconds 1.
 */
export function serveWatch(
  storage: Storage,
  res: ServerResponse,
  req: WatchRequest,
  opts: WatchOptions,
): void {
  const wanted = Number(req.resourceVersion || 0);
  if (req.sendInitialEvents !== true || !(wanted > storage.currentRv())) {
    streamWatch(storage, res, req, opts);
    return;
  }
  let done = false;
  const finish = (): void => {
    done = true;
    clearTimeout(timer);
    unsubscribe();
    untrack();
  };
  const unsubscribe = storage.subscribe(() => {
    if (done || storage.currentRv() < wanted) return;
    finish();
    streamWatch(storage, res, req, opts);
  });
  const timer = setTimeout(() => {
    if (done) return;
    finish();
    // Served as any watch (K11): 200, chunked, the one event, then the end.
    res.writeHead(200, {
      'Content-Type': 'application/json',
      'Cache-Control': 'no-cache, private',
      'Transfer-Encoding': 'chunked',
    });
    res.end(
      `${JSON.stringify({ type: 'ERROR', object: tooLargeResourceVersion(wanted, storage.currentRv(), TOO_HIGH_RETRY_SECONDS).status })}\n`,
    );
  }, BLOCK_TIMEOUT_MS);
  const untrack = opts.track(() => {
    if (done) return;
    finish();
    res.end();
  });
  res.on('close', () => {
    if (!done) finish();
  });
}

function streamWatch(
  storage: Storage,
  res: ServerResponse,
  req: WatchRequest,
  opts: WatchOptions,
): void {
  const key = storageKey(req.rt);
  // Events carry objects as read from storage (codec.ts): the current CRD's defaults.
  const decodeObject = (o: KubeObject): KubeObject => fromStorage(req.rt, o);
  const matches = (o: KubeObject): boolean =>
    (req.namespace === undefined || o.metadata.namespace === req.namespace) &&
    req.labels(o) &&
    req.fields(o);
  const toWatchEvent = (e: StoredEvent): WatchEvent | undefined =>
    e.resource !== key
      ? undefined
      : translate(
          {
            ...e,
            object: decodeObject(e.object),
            ...(e.previous ? { previous: decodeObject(e.previous) } : {}),
          },
          key,
          matches,
        );
  res.writeHead(200, {
    'Content-Type': 'application/json',
    'Cache-Control': 'no-cache, private',
    'Transfer-Encoding': 'chunked',
  });
  res.flushHeaders();
  const send = (event: WatchEvent): void => {
    let object = event.object;
    if (event.type !== 'ERROR' && event.type !== 'BOOKMARK') {
      const typed = withType(event.object as KubeObject, req.rt);
      object = req.table ? toTable(req.rt, [typed], typed.metadata.resourceVersion) : typed;
    }
    res.write(`${JSON.stringify({ type: event.type, object })}\n`);
  };
  const bookmark = (annotations?: Record<string, string>): void =>
    send({
      type: 'BOOKMARK',
      object: {
        kind: req.rt.kind,
        apiVersion: apiVersionOf(req.rt),
        metadata: {
          resourceVersion: String(storage.currentRv()),
          ...(annotations ? { annotations } : {}),
        },
      },
    });

  // Where the watch starts, as watch_cache.go getAllEventsSinceLocked decides it (the
  // RV it is given: cacher.go getWatchCacheResourceVersion, etcd's current RV for "").
  const rv = req.resourceVersion === '' ? 0 : Number(req.resourceVersion);
  // Events at or before this RV are not sent (cache_watcher.go process).
  let since = 0;
  if (req.sendInitialEvents === true || (req.sendInitialEvents === undefined && rv === 0)) {
    // The current state as ADDED events (getIntervalFromStoreLocked); a nil
    // sendInitialEvents from "0" does not reach here from a request (SetListOptionsDefaults).
    for (const o of storage.list(key, req.namespace).map(decodeObject).filter(matches))
      send({ type: 'ADDED', object: o });
    // cacher.go setInitialEventsEndBookmarkIfRequested: only for isListWatchRequest,
    // which needs allowWatchBookmarks too.
    if (req.sendInitialEvents === true && req.allowWatchBookmarks)
      bookmark({ 'k8s.io/initial-events-end': 'true' });
  } else if (rv === 0) {
    // sendInitialEvents=false from "" or "0": from the current RV, no initial state.
    since = storage.currentRv();
  } else {
    since = rv;
    const replay = storage.eventsSince(since, key);
    if (replay === 'expired') {
      send({ type: 'ERROR', object: expired(since, storage.oldestWatchableRv(key)).status });
      res.end();
      return;
    }
    for (const e of replay) {
      const out = toWatchEvent(e);
      if (out) send(out);
    }
  }

  const unsubscribe = storage.subscribe((e) => {
    if (e.rv <= since) return;
    const out = toWatchEvent(e);
    if (out) send(out);
  });
  const timers: NodeJS.Timeout[] = [];
  let untrack = (): void => {};
  const end = (): void => {
    unsubscribe();
    untrack();
    for (const t of timers) clearTimeout(t);
    if (!res.writableEnded) res.end();
  };
  untrack = opts.track(end);
  // A bookmark carries the current RV: none while that is still behind the watch's.
  if (req.allowWatchBookmarks)
    timers.push(
      setInterval(() => {
        if (storage.currentRv() >= since) bookmark();
      }, opts.bookmarkIntervalMs),
    );
  if (req.timeoutSeconds !== undefined && req.timeoutSeconds > 0) {
    timers.push(setTimeout(end, req.timeoutSeconds * 1000));
    // And one 2 s before that end (cache_watcher.go nextBookmarkTime: "right before the
    // watcher timeout", so that the client resumes from as close to now as possible).
    if (req.allowWatchBookmarks && req.timeoutSeconds > PRE_TIMEOUT_BOOKMARK_S)
      timers.push(
        setTimeout(
          () => {
            if (storage.currentRv() >= since) bookmark();
          },
          (req.timeoutSeconds - PRE_TIMEOUT_BOOKMARK_S) * 1000,
        ),
      );
  }
  res.on('close', end);
}
