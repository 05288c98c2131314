// A CRD update while the operator watches its custom resources: the API server
// recreates their storage, ends the open watches after a grace, and answers a watch
// resumed from an older resourceVersion with 410 Expired (kubernetes/kubernetes#123074;
// testing/kube-apiserver K14b). The Kubernetes source must re-watch, relist on the 410
// and so see what changed while it was not watching: an edit and a deletion.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { KubeClient } from '../../operator/controller/kube-client.ts';
import { KubernetesSource, resourcePath } from '../../operator/sources/kubernetes.ts';
import type { ObjectRef } from '../../operator/sources/ports.ts';
import { startKubeApiServer, type KubeApiServer } from '../../testing/kube-apiserver/index.ts';
import { eventually } from '../support/eventually.ts';

const CRDS = resolve(import.meta.dirname, '../../crds');
const NS = 'crd-update';

describe('a CRD update under an open watch', () => {
  let server: KubeApiServer;
  let client: KubeClient;
  let kc: KubeConfig;
  let dir: string;
  let source: KubernetesSource | undefined;

  beforeAll(async () => {
    server = await startKubeApiServer({ crdStorageTeardownMs: 100 });
    server.applyCrdsFrom(CRDS);
    dir = mkdtempSync(join(tmpdir(), 'hookgate-crd-update-'));
    kc = new KubeConfig();
    kc.loadFromFile(server.writeKubeconfig(dir));
    client = new KubeClient(kc);
    await client.request('POST', '/api/v1/namespaces', { body: { metadata: { name: NS } } });
  });

  afterAll(async () => {
    await source?.stop();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const trigger = (name: string) => ({
    apiVersion: 'hookgate.dev/v1alpha1',
    kind: 'WebhookTrigger',
    metadata: { name, namespace: NS },
    spec: { workflowRef: { name: 'hello' }, response: { mode: 'immediateAck' } },
  });

  it('re-watches after the stream ends, relists on the 410 and sees the edit and the deletion it missed', async () => {
    for (const name of ['kept', 'gone']) {
      await client.request('POST', resourcePath('WebhookTrigger', NS), { body: trigger(name) });
    }
    source = new KubernetesSource({
      kubeConfig: kc,
      client,
      namespace: NS,
      watchSecrets: false,
      restartBackoff: { initialMs: 50, maxMs: 200 },
      maxReconnectDelayMs: 50,
    });
    const changed: ObjectRef[] = [];
    await source.start((ref) => changed.push(ref));
    const ref = (name: string): ObjectRef => ({ kind: 'WebhookTrigger', namespace: NS, name });
    expect(source.get(ref('gone'))).toBeDefined();

    // Hold the next WebhookTrigger watch back, so the edits below land while the source
    // is not watching; that watch then starts from an RV older than the new storage.
    const isTriggerWatch = (r: { path: string; query?: Record<string, string> }) =>
      r.query?.watch !== undefined && r.path.endsWith('/webhooktriggers');
    server.faults.delayNext(1, 400, (r) => r.watch && r.path.endsWith('/webhooktriggers'));
    server.clearRequests();
    const crd = parseYaml(
      readFileSync(join(CRDS, 'webhooktriggers.hookgate.dev.yaml'), 'utf8'),
    ) as { spec: { versions: { additionalPrinterColumns?: unknown[] }[] } };
    crd.spec.versions[0]?.additionalPrinterColumns?.push({
      name: 'Path',
      type: 'string',
      jsonPath: '.spec.pathSegment',
    });
    server.applyCrd(crd);
    const crdRv = server.resourceVersion();
    // The old storage ends its watches after the grace; the source re-watches (delayed).
    await eventually(() =>
      expect(server.requests.filter((r) => isTriggerWatch(r)).length).toBeGreaterThan(0),
    );
    changed.length = 0;
    await client.request('PATCH', resourcePath('WebhookTrigger', NS, 'kept'), {
      contentType: 'application/merge-patch+json',
      body: { spec: { pathSegment: 'ingest' } },
    });
    await client.request('DELETE', resourcePath('WebhookTrigger', NS, 'gone'));

    await eventually(() => {
      expect(source?.get(ref('gone'))).toBeUndefined();
      expect(source?.get(ref('kept'))?.spec).toMatchObject({ pathSegment: 'ingest' });
    });
    expect(changed).toEqual(expect.arrayContaining([ref('kept'), ref('gone')]));
    // It got there by relisting (the resumed watch was refused with 410), not by replay.
    const lists = server.requests.filter(
      (r) => r.method === 'GET' && !isTriggerWatch(r) && r.path.endsWith('/webhooktriggers'),
    );
    expect(lists.length).toBeGreaterThan(0);
    const resumedFrom = Number(server.requests.find(isTriggerWatch)?.query.resourceVersion);
    expect(resumedFrom).toBeLessThan(crdRv);
  });
});
