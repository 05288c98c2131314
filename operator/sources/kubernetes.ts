// The Kubernetes adapter of the resource source: informers (client-node ListWatch) on
// Workflows, WebhookTriggers (hookgate.dev/v1alpha1) and core v1 Secrets, in all
// namespaces or in one.
//
// - `start()` resolves only once every informer has completed its initial list, and
//   the change callback has already been called for every listed object (O8).
// - client-node 2.0's ListWatch resumes by itself after a closed stream, a client-side
//   timeout and a 410 (relisting), but after any other error (a 500, a refused
//   connection, a failed list) it emits `error` and stops for good. Each informer here
//   is restarted after such an error with exponential backoff (O7).
// - Status is written with PUT on the `/status` subresource carrying the
//   resourceVersion; a 409 re-reads the object and tries again (client-go DefaultRetry)
//   (O4). Conditions are merged by type onto what the server holds, so a condition type
//   another writer owns is kept and `lastTransitionTime` only moves on a status flip.
// - Finalizers are added and removed with PUT on the main resource, also conditional on
//   the resourceVersion and retried on conflict; only our own finalizer is touched (O6).
import { ListWatch, Watch, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { isDeepStrictEqual } from 'node:util';
import {
  API_VERSION,
  FINALIZER,
  GROUP,
  VERSION,
  WEBHOOK_TRIGGER_PLURAL,
  WORKFLOW_PLURAL,
} from '../../api/v1alpha1/index.ts';
import { realClock, type CancelTimer, type Clock } from '../controller/clock.ts';
import { KubeClient, isNotFound } from '../controller/kube-client.ts';
import {
  DEFAULT_RETRY,
  retryOnConflict,
  type Backoff,
  type RetryDeps,
} from '../controller/retry.ts';
import type { AnyResource, ObjectRef, ResourceSource, SecretData, SourceKind } from './ports.ts';

export interface KubernetesSourceOptions {
  kubeConfig: KubeConfig;
  /** Watch only this namespace. All namespaces when omitted. */
  namespace?: string;
  /** Also watch Secrets (needed to resolve credentials). Default true. */
  watchSecrets?: boolean;
  /** Reuse a client (tests); built from kubeConfig otherwise. */
  client?: KubeClient;
  /** Backoff for restarting an informer that stopped on an error. Default 1 s doubling to 30 s. */
  restartBackoff?: { initialMs: number; maxMs: number };
  /** Cap on client-node's own delay before re-watching a closed stream (1 s → 30 s by default). */
  maxReconnectDelayMs?: number;
  /** Reject `start()` when the initial lists have not all succeeded by then. Default 120 s. */
  syncTimeoutMs?: number;
  /** Conflict retry for status and finalizer writes. Default client-go DefaultRetry. */
  retry?: Backoff;
  retryDeps?: RetryDeps;
  clock?: Clock;
  log?: (msg: string, fields?: Record<string, unknown>) => void;
}

type ResourceKind = Exclude<SourceKind, 'Secret'>;

interface KindInfo {
  kind: SourceKind;
  apiVersion: string;
  /** Path prefix up to (not including) `/namespaces/...` or the plural. */
  prefix: string;
  plural: string;
}

const KINDS: Record<SourceKind, KindInfo> = {
  Workflow: {
    kind: 'Workflow',
    apiVersion: API_VERSION,
    prefix: `/apis/${GROUP}/${VERSION}`,
    plural: WORKFLOW_PLURAL,
  },
  WebhookTrigger: {
    kind: 'WebhookTrigger',
    apiVersion: API_VERSION,
    prefix: `/apis/${GROUP}/${VERSION}`,
    plural: WEBHOOK_TRIGGER_PLURAL,
  },
  Secret: { kind: 'Secret', apiVersion: 'v1', prefix: '/api/v1', plural: 'secrets' },
};

/** Path of a collection (all namespaces when `namespace` is undefined) or of one object. */
export function resourcePath(kind: SourceKind, namespace?: string, name?: string): string {
  const k = KINDS[kind];
  const ns = namespace === undefined ? '' : `/namespaces/${encodeURIComponent(namespace)}`;
  const obj = name === undefined ? '' : `/${encodeURIComponent(name)}`;
  return `${k.prefix}${ns}/${k.plural}${obj}`;
}

/**
 * An object as the API server sends it. The informer's objects are raw JSON (our own
 * list function and client-node's watch both JSON.parse), so timestamps are strings,
 * not the Dates client-node's generated types declare.
 */
interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name?: string;
    namespace?: string;
    resourceVersion?: string;
    finalizers?: string[];
    deletionTimestamp?: string;
    [k: string]: unknown;
  };
  status?: unknown;
  data?: Record<string, string>;
}

interface Condition {
  type: string;
  status: string;
  lastTransitionTime?: string;
  [k: string]: unknown;
}

/**
 * Merge `desired` onto `current` the way meta.SetStatusCondition does, keyed by
 * condition type: our types replace theirs (keeping the server's lastTransitionTime
 * when the status did not flip), other types already on the server are kept.
 */
export function mergeStatus(current: unknown, desired: unknown): unknown {
  if (!isRecord(desired)) return desired;
  const ours = desired.conditions;
  const theirs = isRecord(current) ? current.conditions : undefined;
  if (!Array.isArray(ours) || !Array.isArray(theirs)) return desired;
  const byType = new Map<string, Condition>();
  for (const c of theirs as Condition[]) byType.set(c.type, c);
  const merged: Condition[] = (ours as Condition[]).map((c) => {
    const old = byType.get(c.type);
    byType.delete(c.type);
    if (old && old.status === c.status && old.lastTransitionTime !== undefined) {
      return { ...c, lastTransitionTime: old.lastTransitionTime };
    }
    return c;
  });
  return { ...desired, conditions: [...merged, ...byType.values()] };
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const asKubeObject = (o: KubernetesObject | undefined): KubeObject | undefined =>
  o as unknown as KubeObject | undefined;

/** JSON round trip: drops `undefined`, so comparisons match what the server would store. */
function normalize(v: unknown): unknown {
  return v === undefined ? undefined : (JSON.parse(JSON.stringify(v)) as unknown);
}

const never = <T>(): Promise<T> => new Promise<T>(() => {});

/**
 * client-node's Watch, made stoppable: once stopped it opens no new stream and aborts
 * a stream that was being opened while it stopped.
 */
class StoppableWatch extends Watch {
  stopped = false;

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
    const controller = await super.watch(path, queryParams, callback, done);
    if (this.stopped) controller.abort();
    return controller;
  }
}

/** One ListWatch, restarted with backoff whenever it stops on an error. */
class ManagedInformer {
  readonly info: KindInfo;
  readonly #lw: ListWatch<KubernetesObject>;
  readonly #watch: StoppableWatch;
  readonly #o: InformerDeps;
  #stopped = false;
  #listedOnce = false;
  #errorsThisStart = 0;
  #restartTimer: CancelTimer | undefined;
  /** Pending reconnect delays; cancelled (never resolved) on stop. */
  readonly #delays = new Set<CancelTimer>();
  #backoffMs: number;
  #synced = false;
  #onSynced: (() => void)[] = [];
  /** Restarts after errors, for metrics and tests. */
  restarts = 0;

  constructor(info: KindInfo, deps: InformerDeps) {
    this.info = info;
    this.#o = deps;
    this.#backoffMs = deps.restartBackoff.initialMs;
    this.#watch = new StoppableWatch(deps.kubeConfig);
    const path = resourcePath(info.kind, deps.namespace);
    this.#lw = new ListWatch<KubernetesObject>(
      path,
      this.#watch,
      () => this.#list(path),
      false,
      undefined,
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

  whenSynced(): Promise<void> {
    if (this.#synced) return Promise.resolve();
    return new Promise((resolve) => this.#onSynced.push(resolve));
  }

  get(namespace: string, name: string): KubeObject | undefined {
    return asKubeObject(this.#lw.get(name, namespace));
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
    if (this.#listedOnce && !this.#synced) {
      this.#synced = true;
      this.#o.log('informer synced', { kind: this.info.kind, objects: this.#lw.list().length });
      for (const resolve of this.#onSynced.splice(0)) resolve();
    }
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
    }>('GET', path);
    // Once stopped, never hand a list back: ListWatch would open a watch afterwards.
    if (this.#stopped) return never();
    this.#listedOnce = true;
    // Items of built-in lists come without apiVersion/kind; fill them in.
    const items = (list.items ?? []).map((item) => ({
      ...item,
      apiVersion: item.apiVersion ?? this.info.apiVersion,
      kind: item.kind ?? this.info.kind,
    }));
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

interface InformerDeps {
  kubeConfig: KubeConfig;
  client: KubeClient;
  namespace: string | undefined;
  restartBackoff: { initialMs: number; maxMs: number };
  maxReconnectDelayMs: number;
  clock: Clock;
  log: (msg: string, fields?: Record<string, unknown>) => void;
  onChange: (ref: ObjectRef) => void;
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function errorCode(err: unknown): number | undefined {
  if (!isRecord(err)) return undefined;
  const code = err.statusCode ?? err.code;
  return typeof code === 'number' ? code : undefined;
}

export class KubernetesSource implements ResourceSource {
  readonly #o: KubernetesSourceOptions;
  readonly #client: KubeClient;
  readonly #clock: Clock;
  readonly #log: (msg: string, fields?: Record<string, unknown>) => void;
  #informers = new Map<SourceKind, ManagedInformer>();
  #started = false;

  constructor(options: KubernetesSourceOptions) {
    this.#o = options;
    this.#client = options.client ?? new KubeClient(options.kubeConfig);
    this.#clock = options.clock ?? realClock;
    this.#log = options.log ?? (() => {});
  }

  /** The JSON client this source writes through (shared with leader election and events). */
  get client(): KubeClient {
    return this.#client;
  }

  /** Informer restarts after errors, per kind (observability and tests). */
  restarts(): Record<string, number> {
    return Object.fromEntries([...this.#informers].map(([k, inf]) => [k, inf.restarts]));
  }

  async start(onChange: (ref: ObjectRef) => void): Promise<void> {
    if (this.#started) throw new Error('KubernetesSource already started');
    this.#started = true;
    const kinds: SourceKind[] = ['Workflow', 'WebhookTrigger'];
    if (this.#o.watchSecrets !== false) kinds.push('Secret');
    const deps: InformerDeps = {
      kubeConfig: this.#o.kubeConfig,
      client: this.#client,
      namespace: this.#o.namespace,
      restartBackoff: this.#o.restartBackoff ?? { initialMs: 1000, maxMs: 30_000 },
      maxReconnectDelayMs: this.#o.maxReconnectDelayMs ?? 30_000,
      clock: this.#clock,
      log: this.#log,
      onChange,
    };
    for (const kind of kinds) this.#informers.set(kind, new ManagedInformer(KINDS[kind], deps));
    for (const inf of this.#informers.values()) void inf.start();

    const timeoutMs = this.#o.syncTimeoutMs ?? 120_000;
    let cancel: CancelTimer = () => {};
    const timedOut = new Promise<never>((_, reject) => {
      cancel = this.#clock.setTimer(() => {
        const pending = [...this.#informers.values()]
          .filter((i) => !i.synced)
          .map((i) => i.info.kind);
        reject(
          new Error(
            `timed out after ${timeoutMs} ms waiting for the initial list of ${pending.join(', ')}`,
          ),
        );
      }, timeoutMs);
    });
    try {
      await Promise.race([
        Promise.all([...this.#informers.values()].map((i) => i.whenSynced())),
        timedOut,
      ]);
    } finally {
      cancel();
    }
    this.#log('resource source synced', { namespace: this.#o.namespace ?? '(all)' });
  }

  get(ref: ObjectRef): AnyResource | undefined {
    return this.#informers.get(ref.kind)?.get(ref.namespace, ref.name) as AnyResource | undefined;
  }

  getSecret(namespace: string, name: string): SecretData | undefined {
    const secret = this.#informers.get('Secret')?.get(namespace, name);
    if (!secret) return undefined;
    const data: Record<string, string> = {};
    for (const [k, v] of Object.entries(secret.data ?? {})) {
      data[k] = Buffer.from(v, 'base64').toString('utf8');
    }
    return { namespace, name, data };
  }

  list(kind: ResourceKind): AnyResource[] {
    return (this.#informers.get(kind)?.list() ?? []) as unknown as AnyResource[];
  }

  async writeStatus(ref: ObjectRef, status: unknown): Promise<void> {
    const path = resourcePath(ref.kind, ref.namespace, ref.name);
    await retryOnConflict(
      this.#o.retry ?? DEFAULT_RETRY,
      async (attempt) => {
        const base = await this.#read(ref, attempt === 0);
        if (!base) return;
        const next = normalize(mergeStatus(base.status, status));
        if (isDeepStrictEqual(normalize(base.status), next)) return;
        await this.#ignoreNotFound(
          this.#client.request('PUT', `${path}/status`, { body: { ...base, status: next } }),
        );
      },
      this.#o.retryDeps,
    );
  }

  addFinalizer(ref: ObjectRef): Promise<void> {
    return this.#updateFinalizers(
      ref,
      (list) => {
        if (list.includes(FINALIZER)) return undefined;
        return [...list, FINALIZER];
      },
      true,
    );
  }

  removeFinalizer(ref: ObjectRef): Promise<void> {
    return this.#updateFinalizers(
      ref,
      (list) => {
        if (!list.includes(FINALIZER)) return undefined;
        return list.filter((f) => f !== FINALIZER);
      },
      false,
    );
  }

  async stop(): Promise<void> {
    await Promise.all([...this.#informers.values()].map((i) => i.stop()));
  }

  /**
   * Read-modify-write of metadata.finalizers through the main resource (PUT with the
   * resourceVersion). `edit` returns undefined when nothing needs to change.
   */
  async #updateFinalizers(
    ref: ObjectRef,
    edit: (finalizers: string[]) => string[] | undefined,
    adding: boolean,
  ): Promise<void> {
    const path = resourcePath(ref.kind, ref.namespace, ref.name);
    await retryOnConflict(
      this.#o.retry ?? DEFAULT_RETRY,
      async (attempt) => {
        const fromCache = attempt === 0;
        let base = await this.#read(ref, fromCache);
        if (!base) {
          if (adding) throw new Error(`${ref.kind} ${ref.namespace}/${ref.name} not found`);
          return;
        }
        let next = edit(base.metadata.finalizers ?? []);
        if (!next && fromCache && !adding) {
          // The cache may lag behind our own add: confirm "nothing to remove" with the
          // server, or a deleting object could keep our finalizer for good.
          const fresh = await this.#read(ref, false);
          if (!fresh) return;
          base = fresh;
          next = edit(base.metadata.finalizers ?? []);
        }
        if (!next) return;
        if (adding && base.metadata.deletionTimestamp) {
          // The API server refuses new finalizers on a deleting object (K10).
          return;
        }
        await this.#ignoreNotFound(
          this.#client.request('PUT', path, {
            body: { ...base, metadata: { ...base.metadata, finalizers: next } },
          }),
        );
      },
      this.#o.retryDeps,
    );
  }

  /** The object from the cache on a first attempt, from the API server after a conflict. */
  async #read(ref: ObjectRef, fromCache: boolean): Promise<KubeObject | undefined> {
    if (fromCache) {
      const cached = this.#informers.get(ref.kind)?.get(ref.namespace, ref.name);
      if (cached) return cached;
    }
    try {
      return await this.#client.request<KubeObject>(
        'GET',
        resourcePath(ref.kind, ref.namespace, ref.name),
      );
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async #ignoreNotFound(p: Promise<unknown>): Promise<void> {
    try {
      await p;
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }
}
