// The resource source port: where Workflows, WebhookTriggers and Secrets come from.
// Adapters: a manifest directory (embedded default) and the Kubernetes API.
import type { Resource } from '../../api/v1alpha1/index.ts';

export type SourceKind = 'Workflow' | 'WebhookTrigger' | 'Secret';

export interface ObjectRef {
  kind: SourceKind;
  namespace: string;
  name: string;
}

/** A Secret with its data decoded to UTF-8 strings. */
export interface SecretData {
  namespace: string;
  name: string;
  data: Record<string, string>;
}

export type AnyResource = Resource<unknown, unknown>;

/**
 * The namespaces whose Workflows and WebhookTriggers a source lists and watches:
 * `'all'`, or exactly these.
 */
export type WatchedNamespaces = 'all' | readonly string[];

/** Whether `watched` includes `namespace`. */
export function watches(watched: WatchedNamespaces, namespace: string): boolean {
  return watched === 'all' || watched.includes(namespace);
}

export interface ResourceSource {
  /**
   * Start watching. `onChange` is called with the ref of every object that was
   * added, changed or removed. Resolves once the initial state is loaded (synced):
   * nothing may be reconciled before that. `onSecretAccess` is told when the source
   * starts or stops being allowed to read the Secrets of a namespace (undefined: all
   * of them), so every trigger there can be looked at again.
   */
  start(
    onChange: (ref: ObjectRef) => void,
    onSecretAccess?: (namespace: string | undefined) => void,
  ): Promise<void>;
  /** Current state of one object from the local cache. */
  get(ref: ObjectRef): AnyResource | undefined;
  getSecret(namespace: string, name: string): SecretData | undefined;
  /**
   * The label selector limiting which Secrets `getSecret` can see, when not every
   * Secret (the Kubernetes source: `hookgate.dev/credentials=true`). A Secret that
   * exists without the label is "not found" here; status messages name the label.
   */
  readonly secretSelector?: string | undefined;
  /** Whether Secrets of `namespace` are watched at all (false: `getSecret` finds none). */
  secretsWatchedIn?(namespace: string): boolean;
  /**
   * The API server's answer while it refuses the operator the Secrets of `namespace`
   * (403: RBAC grants no list/watch there), else undefined; `getSecret` finds none then.
   */
  secretsForbiddenIn?(namespace: string): string | undefined;
  list(kind: Exclude<SourceKind, 'Secret'>): AnyResource[];
  /**
   * The namespaces whose objects this source watches. Routes and registrations of any
   * other namespace are none of this operator's business (another operator, watching
   * that namespace, may own them): nothing that acts on every record, such as the sweep
   * of orphaned ones, may touch them.
   */
  readonly namespaces: WatchedNamespaces;
  /**
   * The objects of `kind` that exist now (being deleted included), read from where the
   * source gets them rather than from its cache, which may lag behind: the API server
   * (one list request), the manifest folder (once a reload in progress is done). For
   * decisions a lagging cache must not make, such as deleting a record whose object
   * the cache does not hold.
   */
  listFresh(kind: Exclude<SourceKind, 'Secret'>): Promise<ObjectRef[]>;
  /**
   * Whether a route carrying `uid` for the trigger `ref` can have been written for an
   * object of a source of this kind: a folder gives each object the uid directoryUid
   * derives from its name, a cluster a random one. A route that cannot is another kind
   * of writer's (`hookgate dev` and a cluster's operator on one Redis), and the sweep of
   * orphaned records then deletes nothing.
   */
  mayHaveWritten(ref: ObjectRef, uid: string): boolean;
  /**
   * Write `.status` (through the status subresource where there is one). `uid` is the
   * object's the status was computed for (the reconcile's read): another object of the
   * same name (deleted and created again meanwhile) is left alone, as a gone one.
   */
  writeStatus(ref: ObjectRef, status: unknown, uid?: string): Promise<void>;
  /**
   * Make sure our finalizer is on the object before any side effect. True when it is
   * on a live object; false when the object is gone or being deleted (or the name now
   * holds another object than `uid`): then no side effect may follow, only cleanup.
   * Always true where objects cannot linger.
   */
  addFinalizer(ref: ObjectRef, uid?: string): Promise<boolean>;
  /**
   * Remove our finalizer after cleanup (from the object `uid` names only). No-op where
   * objects cannot linger.
   */
  removeFinalizer(ref: ObjectRef, uid?: string): Promise<void>;
  stop(): Promise<void>;
}
