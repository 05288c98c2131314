// One informer (client-node ListWatch) per kind, kept alive: client-node 2.0's
// ListWatch resumes by itself after a closed stream, a client-side timeout and a 410
// (relisting), but after any other error (a 500, a refused connection, a failed list)
// it emits `error` and stops for good. A ManagedInformer restarts it after such an
// error with exponential backoff (O7), and tells when its initial list is in (synced).
// Its ListWatch is the cache the source reads from; every object is slimmed
// (kube-cache.ts) before the ListWatch stores it, from the list and from the watch.
// A label selector, when given, goes on both the list and the watch request.
//
// Every watch asks for bookmarks and for a server-side timeout, as client-go's
// reflector does (client-node's ListWatch sends neither): `allowWatchBookmarks=true`
// and `timeoutSeconds` drawn in [min, 2·min) (5 to 10 minutes by default). A BOOKMARK
// carries only a resourceVersion, which ListWatch takes as the one to resume from
// (nothing is added, changed or deleted in the cache); so a quiet watch (Secrets)
// resumes after a timeout from a recent resourceVersion instead of the one of its
// last change, which the API server's watch cache may have dropped by then (410 Gone,
// and a relist of everything). The stream's idle timeout (client-node aborts a stream
// that sent nothing for 30 s) is raised above the API server's bookmark period (about
// 60 s), or no bookmark would ever reach a quiet watch.
//
// An informer told to `tolerateForbidden` (the Secrets ones) does not hold the start-up
// back on a 403: the API server refused the list (RBAC: no Role in that namespace),
// so it counts as synced with nothing, reports `forbidden` (the API server's message)
// and keeps retrying with its backoff; the first list that succeeds clears it. Both
// changes are announced through `onAccessChange`. Without it one namespace whose Role
// is missing would stop the operator from ever starting (and crash-loop it).
import { ListWatch, Watch, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import type { CancelTimer, Clock } from '../controller/clock.ts';
import type { KubeClient } from '../controller/kube-client.ts';
import { slim } from './kube-cache.ts';
import { resourcePath, type KindInfo, type KubeObject } from './kube-resources.ts';
import type { ObjectRef } from './ports.ts';

export interface InformerDeps {
  kubeConfig: KubeConfig;
  client: KubeClient;
  namespace: string | undefined;
  restartBackoff: { initialMs: number; maxMs: number };
  maxReconnectDelayMs: number;
  watch: WatchSettings;
  clock: Clock;
  log: (msg: string, fields?: Record<string, unknown>) => void;
  onChange: (ref: ObjectRef) => void;
  /** Called when a `tolerateForbidden` informer becomes forbidden, or allowed again. */
  onAccessChange?: () => void;
}

/** What each watch request asks the API server for, and how long a quiet stream may last. */
export interface WatchSettings {
  /** Each watch asks for `timeoutSeconds` in [this, 2 × this) (client-go: 300). */
  minTimeoutSeconds: number;
  /**
   * A stream that sends nothing (no event, no bookmark) for this long is aborted and
   * re-opened from the last resourceVersion. Must stay above the API server's bookmark
   * period (about 60 s), else bookmarks never reach a quiet watch.
   */
  idleTimeoutMs: number;
  /** In [0, 1): the timeout's draw. Default Math.random. */
  random?: () => number;
}

/** client-go's reflector default (minWatchTimeout): watches last 5 to 10 minutes. */
export const DEFAULT_MIN_WATCH_TIMEOUT_SECONDS = 300;
/** Above a real API server's bookmark period (1 minute, cacher.go bookmarkFrequency). */
export const DEFAULT_WATCH_IDLE_TIMEOUT_MS = 90_000;

const never = <T>(): Promise<T> => new Promise<T>(() => {});

/**
 * client-node's Watch, made stoppable (once stopped it opens no new stream and aborts
 * a stream that was being opened while it stopped), asking for bookmarks and a
 * server-side timeout, and slimming every object an event carries before the ListWatch
 * caches it.
 */
export class StoppableWatch extends Watch {
  stopped = false;
  readonly #transform: (obj: KubeObject) => KubeObject;
  readonly #settings: WatchSettings;

  constructor(
    config: KubeConfig,
    transform: (obj: KubeObject) => KubeObject,
    settings: WatchSettings,
  ) {
    super(config);
    this.#transform = transform;
    this.#settings = settings;
    // client-node 2.0.1 keeps the stream's idle timeout (30 s, also the wait for the
    // answer's headers) in a field its types call private; it is a plain field at run
    // time. test/operator/watch-bookmarks.test.ts fails if that stops being so.
    (this as unknown as { requestTimeoutMs: number }).requestTimeoutMs = settings.idleTimeoutMs;
  }

  /** The `timeoutSeconds` of the next watch request (client-go reflector's draw). */
  timeoutSeconds(): number {
    const min = this.#settings.minTimeoutSeconds;
    return Math.floor(min * (1 + (this.#settings.random ?? Math.random)()));
  }

  override async watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    // The callback signature is client-node's own (it types the object as any).
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    callback: (phase: string, apiObj: any, watchObj?: any) => void,
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    done: (err: any) => void,
  ): Promise<AbortController> {
    if (this.stopped) return new AbortController();
    const params = {
      ...queryParams,
      allowWatchBookmarks: true,
      timeoutSeconds: this.timeoutSeconds(),
    };
    const transform = this.#transform;
    const slimmed = (phase: string, apiObj: unknown): void => {
      // ERROR carries a Status, BOOKMARK only a resourceVersion: passed as they are.
      // ListWatch takes a bookmark's resourceVersion as the one to resume from and
      // changes nothing in its cache.
      const object =
        phase === 'ADDED' || phase === 'MODIFIED' || phase === 'DELETED'
          ? transform(apiObj as KubeObject)
          : apiObj;
      callback(phase, object);
    };
    let controller: AbortController;
    try {
      controller = await super.watch(path, params, slimmed, done);
    } catch (err) {
      // client-node's Watch throws, instead of calling `done`, when it cannot even make
      // the request (the credentials: an exec plugin or a token file failing). ListWatch
      // awaits this inside its own done handler when it re-watches, where the rejection
      // is unhandled: the informer would stop without an `error` (never restarted) and
      // the process would die of the unhandled rejection. Reported through `done`, it
      // is an error like a refused watch: the informer restarts with backoff.
      done(err);
      return new AbortController();
    }
    if (this.stopped) controller.abort();
    return controller;
  }
}

/** One ListWatch, restarted with backoff whenever it stops on an error. */
export class ManagedInformer {
  readonly info: KindInfo;
  readonly #lw: ListWatch<KubernetesObject>;
  readonly #watch: StoppableWatch;
  readonly #o: InformerDeps;
  readonly #labelSelector: string | undefined;
  #stopped = false;
  #listedOnce = false;
  #errorsThisStart = 0;
  #restartTimer: CancelTimer | undefined;
  /** Pending reconnect delays; cancelled (never resolved) on stop. */
  readonly #delays = new Set<CancelTimer>();
  #backoffMs: number;
  #synced = false;
  #onSynced: (() => void)[] = [];
  readonly #tolerateForbidden: boolean;
  #forbidden: string | undefined;
  /** Restarts after errors, for metrics and tests. */
  restarts = 0;

  /** `labelSelector` limits the list and the watch (e.g. `hookgate.dev/credentials=true`). */
  constructor(
    info: KindInfo,
    deps: InformerDeps,
    labelSelector?: string,
    opts: { tolerateForbidden?: boolean } = {},
  ) {
    this.info = info;
    this.#o = deps;
    this.#labelSelector = labelSelector;
    this.#tolerateForbidden = opts.tolerateForbidden === true;
    this.#backoffMs = deps.restartBackoff.initialMs;
    this.#watch = new StoppableWatch(
      deps.kubeConfig,
      (obj) => slim(obj, info.kind, info.apiVersion),
      deps.watch,
    );
    const path = resourcePath(info.kind, deps.namespace);
    this.#lw = new ListWatch<KubernetesObject>(
      path,
      this.#watch,
      () => this.#list(path),
      false,
      labelSelector,
      undefined,
      {
        delayFn: (ms) => this.#delay(ms),
      },
    );
    const changed = (obj: KubernetesObject): void => {
      const name = obj.metadata?.name;
      if (!name) return;
      deps.onChange({ kind: info.kind, namespace: obj.metadata?.namespace ?? '', name });
    };
    this.#lw.on('add', changed);
    this.#lw.on('update', changed);
    this.#lw.on('delete', changed);
    this.#lw.on('error', (err: unknown) => this.#onError(err));
  }

  get synced(): boolean {
    return this.#synced;
  }

  /** The API server's 403 message while it refuses this informer's list, else undefined. */
  get forbidden(): string | undefined {
    return this.#forbidden;
  }

  whenSynced(): Promise<void> {
    if (this.#synced) return Promise.resolve();
    return new Promise((resolve) => this.#onSynced.push(resolve));
  }

  /** The resourceVersion a re-watch resumes from (moved by events and bookmarks). */
  get resourceVersion(): string {
    return this.#lw.latestResourceVersion();
  }

  get(namespace: string, name: string): KubeObject | undefined {
    return this.#lw.get(name, namespace) as unknown as KubeObject | undefined;
  }

  list(): KubeObject[] {
    return this.#lw.list().map((o) => o as unknown as KubeObject);
  }

  async start(): Promise<void> {
    if (this.#stopped) return;
    this.#errorsThisStart = 0;
    try {
      await this.#lw.start();
    } catch (err) {
      this.#onError(err);
      return;
    }
    if (this.#stopped) return;
    if (this.#errorsThisStart === 0) this.#backoffMs = this.#o.restartBackoff.initialMs;
    if (this.#listedOnce) this.#markSynced();
  }

  #markSynced(): void {
    if (this.#synced) return;
    this.#synced = true;
    this.#o.log('informer synced', { kind: this.info.kind, objects: this.#lw.list().length });
    for (const resolve of this.#onSynced.splice(0)) resolve();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#watch.stopped = true;
    this.#restartTimer?.();
    this.#restartTimer = undefined;
    for (const cancel of this.#delays) cancel();
    this.#delays.clear();
    await this.#lw.stop();
  }

  async #list(
    path: string,
  ): Promise<{ items: KubernetesObject[]; metadata?: { resourceVersion?: string } }> {
    const list = await this.#o.client.request<{
      items?: KubeObject[];
      metadata?: { resourceVersion?: string };
    }>('GET', path, this.#labelSelector ? { query: { labelSelector: this.#labelSelector } } : {});
    // Once stopped, never hand a list back: ListWatch would open a watch afterwards.
    if (this.#stopped) return never();
    this.#listedOnce = true;
    // Allowed again: cleared before the ListWatch adds the items, so the reconciles
    // their add events cause see them.
    if (this.#forbidden !== undefined) {
      this.#forbidden = undefined;
      this.#o.log('informer allowed again', { kind: this.info.kind });
      this.#o.onAccessChange?.();
    }
    // Slimmed like watched objects; items of built-in lists get their apiVersion/kind.
    const items = (list.items ?? []).map((item) =>
      slim(item, this.info.kind, this.info.apiVersion),
    );
    return {
      items: items as unknown as KubernetesObject[],
      ...(list.metadata ? { metadata: list.metadata } : {}),
    };
  }

  #delay(ms: number): Promise<void> {
    if (this.#stopped) return never();
    const capped = Math.min(ms, this.#o.maxReconnectDelayMs);
    return new Promise((resolve) => {
      const cancel = this.#o.clock.setTimer(() => {
        this.#delays.delete(cancel);
        resolve();
      }, capped);
      this.#delays.add(cancel);
    });
  }

  #onError(err: unknown): void {
    if (this.#stopped) return;
    this.#errorsThisStart++;
    if (this.#tolerateForbidden && errorCode(err) === 403) {
      const first = this.#forbidden === undefined;
      this.#forbidden = describe(err);
      this.#markSynced();
      if (first) this.#o.onAccessChange?.();
    }
    if (this.#restartTimer) return;
    const delay = this.#backoffMs;
    this.#backoffMs = Math.min(this.#backoffMs * 2, this.#o.restartBackoff.maxMs);
    this.#o.log('informer stopped on an error; restarting', {
      kind: this.info.kind,
      error: describe(err),
      code: errorCode(err),
      inMs: delay,
    });
    this.#restartTimer = this.#o.clock.setTimer(() => {
      this.#restartTimer = undefined;
      this.restarts++;
      void this.start();
    }, delay);
  }
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function errorCode(err: unknown): number | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const { statusCode, code } = err as { statusCode?: unknown; code?: unknown };
  const value = statusCode ?? code;
  return typeof value === 'number' ? value : undefined;
}
