// The Kubernetes adapter of the resource source: informers (client-node ListWatch) on
// Workflows, WebhookTriggers (hookgate.dev/v1alpha1) and core v1 Secrets, in all
// namespaces or in one. Only Secrets labelled `hookgate.dev/credentials=true` are
// listed and watched (a label selector); a trigger referring to any other Secret sees
// it as not found, and its status says which label is missing.
//
// - The cache keeps a slimmed copy of each object (kube-cache.ts): no managedFields,
//   no annotations (so no last-applied-configuration), no labels.
//
// - `start()` resolves only once every informer has completed its initial list, and
//   the change callback has already been called for every listed object (O8). A
//   Secrets informer the API server refuses (403: no RBAC in that namespace) counts as
//   synced with no Secrets and keeps retrying; `secretsForbiddenIn` reports it, and
//   `onSecretAccess` tells when that changes, so the triggers there say SecretForbidden
//   (and recover) instead of the operator never starting.
// - Each informer is restarted with backoff after an error that stops client-node's
//   ListWatch for good (O7): kube-informer.ts. Its watches ask for bookmarks and a
//   server-side timeout (5 to 10 minutes), as client-go's reflector does, so a quiet
//   watch resumes from a recent resourceVersion instead of relisting after a 410.
// - Status and finalizer writes, conditional on the resourceVersion and retried on
//   conflict (O4, O6): kube-writes.ts.
import type { KubeConfig } from '@kubernetes/client-node';
import { realClock, type CancelTimer, type Clock } from '../controller/clock.ts';
import { KubeClient } from '../controller/kube-client.ts';
import type { Backoff, RetryDeps } from '../controller/retry.ts';
import {
  DEFAULT_MIN_WATCH_TIMEOUT_SECONDS,
  DEFAULT_WATCH_IDLE_TIMEOUT_MS,
  ManagedInformer,
  type InformerDeps,
} from './kube-informer.ts';
import { CREDENTIALS_SELECTOR, KINDS, resourcePath, type KubeObject } from './kube-resources.ts';
import { KubeWriter } from './kube-writes.ts';
import { directoryUid } from './directory.ts';
import { API_VERSION } from '../../api/v1alpha1/index.ts';
import type {
  AnyResource,
  ObjectRef,
  ResourceSource,
  SecretData,
  SourceKind,
  WatchedNamespaces,
} from './ports.ts';

export { CREDENTIALS_LABEL, CREDENTIALS_SELECTOR, resourcePath } from './kube-resources.ts';
export { mergeStatus } from './kube-writes.ts';

export interface KubernetesSourceOptions {
  kubeConfig: KubeConfig;
  /** Watch only this namespace. All namespaces when omitted. */
  namespace?: string;
  /** Also watch Secrets (needed to resolve credentials). Default true. */
  watchSecrets?: boolean;
  /**
   * Label selector of the Secrets to watch. Default `hookgate.dev/credentials=true`
   * (CREDENTIALS_SELECTOR); `''` watches every Secret (not recommended: the operator
   * then needs to list every Secret and keeps them all in memory).
   */
  secretSelector?: string;
  /**
   * Watch Secrets only in these namespaces, with one list and watch each, so the
   * operator needs `list`/`watch` on Secrets there only (a Role per namespace instead
   * of a ClusterRole; RBAC cannot limit them by label). A trigger in another namespace
   * finds no Secret. Default: the watched namespace, or all of them.
   */
  secretNamespaces?: string[];
  /** Reuse a client (tests); built from kubeConfig otherwise. */
  client?: KubeClient;
  /** Backoff for restarting an informer that stopped on an error. Default 1 s doubling to 30 s. */
  restartBackoff?: { initialMs: number; maxMs: number };
  /** Cap on client-node's own delay before re-watching a closed stream (1 s → 30 s by default). */
  maxReconnectDelayMs?: number;
  /**
   * Each watch asks the API server to end it after `timeoutSeconds` drawn in
   * [this, 2 × this), as client-go's reflector does. Default 300 (5 to 10 minutes).
   */
  minWatchTimeoutSeconds?: number;
  /**
   * A watch stream that sends nothing, not even a bookmark, for this long is dropped
   * and re-opened. Default 90 s: above the API server's bookmark period (about 60 s).
   */
  watchIdleTimeoutMs?: number;
  /** Reject `start()` when the initial lists have not all succeeded by then. Default 120 s. */
  syncTimeoutMs?: number;
  /** Conflict retry for status and finalizer writes. Default client-go DefaultRetry. */
  retry?: Backoff;
  retryDeps?: RetryDeps;
  clock?: Clock;
  log?: (msg: string, fields?: Record<string, unknown>) => void;
}

export class KubernetesSource implements ResourceSource {
  readonly #o: KubernetesSourceOptions;
  readonly #client: KubeClient;
  readonly #clock: Clock;
  readonly #log: (msg: string, fields?: Record<string, unknown>) => void;
  readonly #writer: KubeWriter;
  #informers = new Map<SourceKind, ManagedInformer>();
  /** Secret informers by namespace ('' for one over all watched namespaces). */
  #secretInformers = new Map<string, ManagedInformer>();
  #started = false;

  constructor(options: KubernetesSourceOptions) {
    this.#o = options;
    this.#client = options.client ?? new KubeClient(options.kubeConfig);
    this.#clock = options.clock ?? realClock;
    this.#log = options.log ?? (() => {});
    this.#writer = new KubeWriter({
      client: this.#client,
      cached: (ref) => this.#informers.get(ref.kind)?.get(ref.namespace, ref.name),
      retry: options.retry,
      retryDeps: options.retryDeps,
    });
  }

  /** The label selector Secrets are watched with; undefined when every Secret is (or none). */
  get secretSelector(): string | undefined {
    if (this.#o.watchSecrets === false) return undefined;
    const selector = this.#o.secretSelector ?? CREDENTIALS_SELECTOR;
    return selector === '' ? undefined : selector;
  }

  secretsWatchedIn(namespace: string): boolean {
    if (this.#o.watchSecrets === false) return false;
    const namespaces = this.#o.secretNamespaces;
    if (namespaces) return namespaces.includes(namespace);
    return this.#o.namespace === undefined || this.#o.namespace === namespace;
  }

  /** The JSON client this source writes through (shared with leader election and events). */
  get client(): KubeClient {
    return this.#client;
  }

  /**
   * The resourceVersion each informer would resume its watch from, named as in
   * `restarts()`: moved by every event and bookmark.
   */
  resourceVersions(): Record<string, string> {
    return Object.fromEntries(
      [...this.#all()].map(([k, inf]) => [k, inf.resourceVersion] as const),
    );
  }

  /** Informer restarts after errors, per kind (`Secret/<namespace>` per Secret namespace). */
  restarts(): Record<string, number> {
    return Object.fromEntries([...this.#all()].map(([k, inf]) => [k, inf.restarts] as const));
  }

  async start(
    onChange: (ref: ObjectRef) => void,
    onSecretAccess?: (namespace: string | undefined) => void,
  ): Promise<void> {
    if (this.#started) throw new Error('KubernetesSource already started');
    this.#started = true;
    const deps: InformerDeps = {
      kubeConfig: this.#o.kubeConfig,
      client: this.#client,
      namespace: this.#o.namespace,
      restartBackoff: this.#o.restartBackoff ?? { initialMs: 1000, maxMs: 30_000 },
      maxReconnectDelayMs: this.#o.maxReconnectDelayMs ?? 30_000,
      watch: {
        minTimeoutSeconds: this.#o.minWatchTimeoutSeconds ?? DEFAULT_MIN_WATCH_TIMEOUT_SECONDS,
        idleTimeoutMs: this.#o.watchIdleTimeoutMs ?? DEFAULT_WATCH_IDLE_TIMEOUT_MS,
      },
      clock: this.#clock,
      log: this.#log,
      onChange: (ref) => {
        this.#writer.observed(ref);
        onChange(ref);
      },
    };
    for (const kind of ['Workflow', 'WebhookTrigger'] as const) {
      this.#informers.set(kind, new ManagedInformer(KINDS[kind], deps));
    }
    if (this.#o.watchSecrets !== false) {
      const namespaces = this.#o.secretNamespaces ?? [undefined];
      for (const namespace of namespaces) {
        this.#secretInformers.set(
          namespace ?? '',
          new ManagedInformer(
            KINDS.Secret,
            {
              ...deps,
              namespace: namespace ?? deps.namespace,
              onAccessChange: () => onSecretAccess?.(namespace),
            },
            this.secretSelector,
            { tolerateForbidden: true },
          ),
        );
      }
    }
    for (const [, inf] of this.#all()) void inf.start();
    await this.#whenSynced(this.#o.syncTimeoutMs ?? 120_000);
    this.#log('resource source synced', { namespace: this.#o.namespace ?? '(all)' });
  }

  /** The informer's copy, or our own later write of it while the informer lags behind. */
  get(ref: ObjectRef): AnyResource | undefined {
    const object =
      this.#writer.latest(ref) ?? this.#informers.get(ref.kind)?.get(ref.namespace, ref.name);
    return object as AnyResource | undefined;
  }

  /** The Secrets informer that would hold `namespace`'s Secrets, if any. */
  #secretInformerFor(namespace: string): ManagedInformer | undefined {
    return this.#o.secretNamespaces
      ? this.#secretInformers.get(namespace)
      : this.#secretInformers.get('');
  }

  /** The API server's 403 message while it refuses the operator `namespace`'s Secrets. */
  secretsForbiddenIn(namespace: string): string | undefined {
    return this.#secretInformerFor(namespace)?.forbidden;
  }

  getSecret(namespace: string, name: string): SecretData | undefined {
    const informer = this.#secretInformerFor(namespace);
    if (informer?.forbidden !== undefined) return undefined;
    const secret = informer?.get(namespace, name);
    if (!secret) return undefined;
    const data: Record<string, string> = {};
    for (const [k, v] of Object.entries(secret.data ?? {})) {
      data[k] = Buffer.from(v, 'base64').toString('utf8');
    }
    return { namespace, name, data };
  }

  list(kind: Exclude<SourceKind, 'Secret'>): AnyResource[] {
    return (this.#informers.get(kind)?.list() ?? []) as unknown as AnyResource[];
  }

  /** The watched namespace, or all of them. */
  get namespaces(): WatchedNamespaces {
    return this.#o.namespace === undefined ? 'all' : [this.#o.namespace];
  }

  /**
   * A list request to the API server, without a resourceVersion: the most recent state
   * (a quorum read), not the informer's cache nor the API server's watch cache. What
   * it answers decides what the orphan sweep deletes, so an answer that is not a whole
   * list (no `items` array: a proxy's page, a Status) is an error, never "no objects",
   * and a page that says more follow (`metadata.continue`) is followed.
   */
  async listFresh(kind: Exclude<SourceKind, 'Secret'>): Promise<ObjectRef[]> {
    const path = resourcePath(kind, this.#o.namespace);
    const refs: ObjectRef[] = [];
    let token: string | undefined;
    do {
      const list = await this.#client.request<unknown>(
        'GET',
        path,
        token ? { query: { continue: token } } : {},
      );
      const { items, metadata } = (list ?? {}) as {
        items?: unknown;
        metadata?: { continue?: unknown };
      };
      if (!Array.isArray(items)) {
        throw new Error(`GET ${path}: the answer is not a list (no items array)`);
      }
      for (const item of items as KubeObject[]) {
        const { name, namespace } = item.metadata ?? {};
        if (name) refs.push({ kind, namespace: namespace ?? 'default', name });
      }
      token = typeof metadata?.continue === 'string' ? metadata.continue : undefined;
    } while (token);
    return refs;
  }

  /** An API server's uids are random: never the one a folder derives from the name. */
  mayHaveWritten(ref: ObjectRef, uid: string): boolean {
    return uid !== directoryUid(API_VERSION, ref.kind, ref.namespace, ref.name);
  }

  writeStatus(ref: ObjectRef, status: unknown, uid?: string): Promise<void> {
    return this.#writer.writeStatus(ref, status, uid);
  }

  addFinalizer(ref: ObjectRef, uid?: string): Promise<boolean> {
    return this.#writer.addFinalizer(ref, uid);
  }

  removeFinalizer(ref: ObjectRef, uid?: string): Promise<void> {
    return this.#writer.removeFinalizer(ref, uid);
  }

  async stop(): Promise<void> {
    await Promise.all([...this.#all()].map(([, i]) => i.stop()));
  }

  /** Every informer, named by kind (and `Secret/<namespace>` per Secret namespace). */
  *#all(): Generator<[string, ManagedInformer]> {
    yield* this.#informers;
    for (const [namespace, inf] of this.#secretInformers) {
      yield [this.#o.secretNamespaces ? `Secret/${namespace}` : 'Secret', inf];
    }
  }

  /** Every informer's initial list, or a rejection naming the kinds still missing. */
  async #whenSynced(timeoutMs: number): Promise<void> {
    let cancel: CancelTimer = () => {};
    const timedOut = new Promise<never>((_, reject) => {
      cancel = this.#clock.setTimer(() => {
        const pending = [...this.#all()].filter(([, i]) => !i.synced).map(([name]) => name);
        reject(
          new Error(
            `timed out after ${timeoutMs} ms waiting for the initial list of ${pending.join(', ')}`,
          ),
        );
      }, timeoutMs);
    });
    try {
      await Promise.race([Promise.all([...this.#all()].map(([, i]) => i.whenSynced())), timedOut]);
    } finally {
      cancel();
    }
  }
}
