// Shared helpers of the kube-apiserver test suites: manifests, a tiny HTTP client and
// a watch-stream reader that works on raw lines (K11).
import type { KubeApiServer } from '../../testing/kube-apiserver/server.ts';

export const GROUP = 'hookgate.dev';
export const VERSION = 'v1alpha1';
export const WT = `/apis/${GROUP}/${VERSION}/namespaces/default/webhooktriggers`;
export const WF = `/apis/${GROUP}/${VERSION}/namespaces/default/workflows`;
export const WIDGETS = '/apis/test.hookgate.dev/v1/namespaces/default/widgets';
export const GADGETS = '/apis/test.hookgate.dev/v1/namespaces/default/gadgets';

export type Obj = Record<string, unknown> & {
  metadata: Record<string, unknown> & {
    name: string;
    resourceVersion?: string;
    generation?: number;
    finalizers?: string[];
    labels?: Record<string, string>;
  };
};

export function trigger(
  name: string,
  spec: Record<string, unknown> = {},
  labels?: Record<string, string>,
): Obj {
  return {
    apiVersion: `${GROUP}/${VERSION}`,
    kind: 'WebhookTrigger',
    metadata: { name, ...(labels ? { labels } : {}) },
    spec: { workflowRef: { name: 'orders' }, response: { mode: 'immediateAck' }, ...spec },
  };
}

export function workflow(name: string): Obj {
  return {
    apiVersion: `${GROUP}/${VERSION}`,
    kind: 'Workflow',
    metadata: { name },
    spec: {
      application: 'shop',
      environment: 'development',
      nodes: [{ id: 'reply', type: 'respond' }],
    },
  };
}

/**
 * Test CRDs: Widget (no status subresource, no printer columns, a transition rule, a
 * preserve-unknown-fields field, a selectable field) and Gadget (a rule that does
 * not compile, to be rejected).
 */
export function widgetCrd(): Record<string, unknown> {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: 'widgets.test.hookgate.dev' },
    spec: {
      group: 'test.hookgate.dev',
      scope: 'Namespaced',
      names: { kind: 'Widget', plural: 'widgets', singular: 'widget', listKind: 'WidgetList' },
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          selectableFields: [{ jsonPath: '.spec.color' }],
          schema: {
            openAPIV3Schema: {
              type: 'object',
              properties: {
                spec: {
                  type: 'object',
                  properties: {
                    color: { type: 'string', default: 'blue' },
                    size: { type: 'integer', minimum: 1, default: 1 },
                    immutableId: {
                      type: 'string',
                      'x-kubernetes-validations': [
                        {
                          rule: 'self == oldSelf',
                          messageExpression: "'immutableId is immutable, was ' + oldSelf",
                        },
                      ],
                    },
                    extra: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
                    tags: { type: 'array', items: { type: 'string' } },
                    zones: {
                      type: 'array',
                      items: { type: 'string' },
                      'x-kubernetes-list-type': 'set',
                      'x-kubernetes-validations': [
                        { rule: 'self == oldSelf', message: 'zones are immutable (order aside)' },
                      ],
                    },
                  },
                  'x-kubernetes-validations': [
                    {
                      rule: "!has(self.tags) || self.tags.all(t, t.startsWith('t-'))",
                      message: 'tags must start with t-',
                      fieldPath: '.tags',
                    },
                  ],
                },
                status: { type: 'object', properties: { phase: { type: 'string' } } },
              },
            },
          },
        },
      ],
    },
  };
}

export function widget(
  name: string,
  spec: Record<string, unknown> = {},
  labels?: Record<string, string>,
): Obj {
  return {
    apiVersion: 'test.hookgate.dev/v1',
    kind: 'Widget',
    metadata: { name, ...(labels ? { labels } : {}) },
    spec,
  };
}

export interface Reply<T = Obj> {
  status: number;
  headers: Headers;
  body: T;
}

/** A fetch wrapper: JSON in, JSON out. */
export function client(server: KubeApiServer) {
  return async function call<T = Obj>(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<Reply<T>> {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: {
        Authorization: 'Bearer anything',
        ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}),
        ...headers,
      },
      ...(body !== undefined
        ? { body: typeof body === 'string' ? body : JSON.stringify(body) }
        : {}),
    });
    const text = await res.text();
    return {
      status: res.status,
      headers: res.headers,
      body: (text ? JSON.parse(text) : undefined) as T,
    };
  };
}

export interface WatchEvent {
  type: string;
  object: Obj & { code?: number; reason?: string; message?: string };
}

export interface WatchResult {
  status: number;
  headers: Headers;
  events: WatchEvent[];
  /** Raw lines as received (each must be one JSON document). */
  lines: string[];
  /** True when the server ended the stream (rather than the reader stopping). */
  ended: boolean;
}

/** Open a watch; collect events until `count` arrived, the stream ended, or `timeoutMs`. */
export async function readWatch(
  url: string,
  opts: { count?: number; timeoutMs?: number; onOpen?: () => Promise<void> | void } = {},
): Promise<WatchResult> {
  const abort = new AbortController();
  const res = await fetch(url, { signal: abort.signal, headers: { Authorization: 'Bearer x' } });
  // The time budget starts once the stream is open, so a slow machine only delays it.
  const timer = setTimeout(() => abort.abort(), opts.timeoutMs ?? 2000);
  const lines: string[] = [];
  let ended = false;
  const decoder = new TextDecoder();
  let buffer = '';
  const reader = res.body?.getReader();
  const opened = opts.onOpen?.();
  try {
    for (;;) {
      if (opts.count !== undefined && lines.length >= opts.count) break;
      const { done, value } = reader ? await reader.read() : { done: true, value: undefined };
      if (done) {
        ended = true;
        break;
      }
      buffer += decoder.decode(value, { stream: true });
      let nl: number;
      while ((nl = buffer.indexOf('\n')) >= 0) {
        lines.push(buffer.slice(0, nl));
        buffer = buffer.slice(nl + 1);
      }
    }
  } catch (err) {
    if (!abort.signal.aborted) throw err;
  } finally {
    clearTimeout(timer);
    abort.abort();
    await opened;
  }
  const events = lines.map((l) => JSON.parse(l) as WatchEvent);
  return { status: res.status, headers: res.headers, events, lines, ended };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
