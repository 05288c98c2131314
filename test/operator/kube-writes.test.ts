// KubeWriter reads its own writes: the object a write returns is the base of the next
// one while the informer lags behind (even when it delivers our own earlier writes on
// the way), and is dropped once the informer has caught up or someone else wrote.
// A small fake API server (one object, resourceVersion preconditions) stands in.
import { KubeConfig } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { FINALIZER } from '../../api/v1alpha1/index.ts';
import {
  KubeApiError,
  KubeClient,
  type RequestOptions,
  type Verb,
} from '../../operator/controller/kube-client.ts';
import type { KubeObject } from '../../operator/sources/kube-resources.ts';
import { KubeWriter, StatusChangedError } from '../../operator/sources/kube-writes.ts';
import type { ObjectRef } from '../../operator/sources/ports.ts';

/** One Workflow with a resourceVersion counter; writes carrying a stale one get 409. */
class FakeApi extends KubeClient {
  object: KubeObject = {
    apiVersion: 'hookgate.dev/v1alpha1',
    kind: 'Workflow',
    metadata: { name: 'w', namespace: 'ns', resourceVersion: '1' },
    status: {},
  };
  conflicts = 0;
  gets = 0;
  #rv = 1;

  constructor() {
    super(new KubeConfig());
  }

  /** Someone else changes the object. */
  touch(): void {
    this.object = structuredClone(this.object);
    this.object.metadata.resourceVersion = String(++this.#rv);
  }

  override request<T>(verb: Verb, _path: string, opts: RequestOptions = {}): Promise<T> {
    if (verb === 'GET') {
      this.gets++;
      return Promise.resolve(structuredClone(this.object) as T);
    }
    const body = opts.body as KubeObject & { metadata: { finalizers?: string[] } };
    if (body.metadata.resourceVersion !== this.object.metadata.resourceVersion) {
      this.conflicts++;
      return Promise.reject(new KubeApiError(409, 'conflict', 'Conflict'));
    }
    const next = structuredClone(this.object);
    if (verb === 'PUT') next.status = body.status;
    else next.metadata.finalizers = body.metadata.finalizers;
    next.metadata.resourceVersion = String(++this.#rv);
    this.object = next;
    return Promise.resolve(structuredClone(next) as T);
  }
}

function setup() {
  const api = new FakeApi();
  let informer: KubeObject = structuredClone(api.object);
  const writer = new KubeWriter({ client: api, cached: () => informer });
  const ref: ObjectRef = { kind: 'Workflow', namespace: 'ns', name: 'w' };
  /** The informer receives the server's object as it was after write number `rv`. */
  const deliver = (object: KubeObject) => {
    informer = structuredClone(object);
    writer.observed(ref);
  };
  return { api, writer, ref, deliver };
}

const condition = (status: string) => ({ conditions: [{ type: 'Ready', status }] });

describe('KubeWriter: read your own writes', () => {
  it('chains writes while the informer lags, even as it delivers our earlier writes', async () => {
    const { api, writer, ref, deliver } = setup();
    await writer.writeStatus(ref, condition('Unknown'));
    const first = structuredClone(api.object);
    await writer.addFinalizer(ref);
    // The informer now sends our first write: our second is still newer.
    deliver(first);
    expect(writer.pendingWrites).toBe(1);
    await writer.writeStatus(ref, condition('True'));
    expect(api.conflicts).toBe(0);
    expect(api.gets).toBe(0);
    expect(api.object.metadata.finalizers).toEqual([FINALIZER]);
    expect(api.object.status).toEqual(condition('True'));
    // Caught up with our last write: nothing kept.
    deliver(api.object);
    expect(writer.pendingWrites).toBe(0);
  });

  it("drops its copy when the informer brings someone else's write", async () => {
    const { api, writer, ref, deliver } = setup();
    await writer.writeStatus(ref, condition('Unknown'));
    api.touch();
    deliver(api.object);
    expect(writer.pendingWrites).toBe(0);
    await writer.writeStatus(ref, condition('True'));
    expect(api.conflicts).toBe(0);
    expect(api.object.status).toEqual(condition('True'));
  });

  it('a write based on a stale copy conflicts, re-reads the server and succeeds', async () => {
    const { api, writer, ref } = setup();
    await writer.writeStatus(ref, condition('Unknown'));
    api.touch(); // the informer has not seen it
    await writer.writeStatus(ref, condition('True'));
    expect(api.conflicts).toBe(1);
    expect(api.gets).toBe(1);
    expect(api.object.status).toEqual(condition('True'));
  });
});

describe('KubeWriter: a status another writer wrote since the read is not overwritten', () => {
  // Two writers of one object's status: a replica that lost the Lease finishing a
  // reconcile beside the new leader. The status computed from the older read must not
  // replace the newer one on the conflict's retry: the same generation, so no watch
  // event would have it reconciled again (ADR 0008). The write fails instead, and the
  // reconcile runs again from what is there now.
  it('a 409 whose re-read shows another status: StatusChangedError, nothing written', async () => {
    const { api, writer, ref } = setup();
    await writer.writeStatus(ref, condition('Unknown'));
    // The new leader's write, which this writer's copy has not seen.
    api.touch();
    api.object.status = condition('True');
    await expect(writer.writeStatus(ref, condition('False'))).rejects.toBeInstanceOf(
      StatusChangedError,
    );
    expect(api.object.status).toEqual(condition('True'));
  });

  it('a 409 for a change to anything but status (a label, the spec) is retried as before', async () => {
    const { api, writer, ref } = setup();
    await writer.writeStatus(ref, condition('Unknown'));
    api.touch();
    await writer.writeStatus(ref, condition('False'));
    expect(api.object.status).toEqual(condition('False'));
  });
});
