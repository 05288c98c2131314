// Where the Kubernetes source finds each kind it watches, and the raw shape of the
// objects the API server sends.
import {
  API_VERSION,
  GROUP,
  VERSION,
  WEBHOOK_TRIGGER_PLURAL,
  WORKFLOW_PLURAL,
} from '../../api/v1alpha1/index.ts';
import type { SourceKind } from './ports.ts';

export interface KindInfo {
  kind: SourceKind;
  apiVersion: string;
  /** Path prefix up to (not including) `/namespaces/...` or the plural. */
  prefix: string;
  plural: string;
}

export const KINDS: Record<SourceKind, KindInfo> = {
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

/**
 * The label a Secret must carry for the operator to see it. The operator lists and
 * watches only Secrets with `hookgate.dev/credentials=true` (a label selector on the
 * list and the watch), never every Secret in the cluster.
 */
export const CREDENTIALS_LABEL = 'hookgate.dev/credentials';
export const CREDENTIALS_SELECTOR = `${CREDENTIALS_LABEL}=true`;

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
export interface KubeObject {
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
