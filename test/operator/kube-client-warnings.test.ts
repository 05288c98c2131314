// The operator's KubeClient reports the API server's `Warning` headers, as client-go's
// default warning handler logs them: only 299 warnings, each distinct text once per
// client (controller-runtime's KubeAPIWarningLogger deduplicates by default). Parsed
// as apimachinery's net.ParseWarningHeaders parses them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeClient, parseWarningHeaders } from '../../operator/controller/kube-client.ts';
import { trigger, WT } from '../kube-apiserver/support.ts';
import { startTestCluster, type TestCluster } from '../support/test-cluster.ts';

describe('parseWarningHeaders', () => {
  it('reads code, agent and quoted text, lists and escapes; stops at a malformed warning', () => {
    expect(
      parseWarningHeaders([
        '299 - "a \\"quoted\\" text", 299 kube-apiserver "second" "Tue, 15 Nov 1994 08:12:31 GMT"',
        '199 - "misc"',
        '299 - "ok", garbage, 299 - "never"',
      ]),
    ).toEqual([
      { code: 299, agent: '-', text: 'a "quoted" text' },
      { code: 299, agent: 'kube-apiserver', text: 'second' },
      { code: 199, agent: '-', text: 'misc' },
      { code: 299, agent: '-', text: 'ok' },
    ]);
  });
});

describe('KubeClient warnings', () => {
  let cluster: TestCluster;

  beforeAll(async () => {
    cluster = await startTestCluster({ crds: true });
  });

  afterAll(async () => {
    await cluster.close();
  });

  it('reports each distinct 299 Warning the API server sends once per client', async () => {
    const warnings: string[] = [];
    const client = new KubeClient(cluster.kc, { onWarning: (m) => warnings.push(m) });
    const withFinalizers = (name: string, finalizers: string[]) => ({
      ...trigger(name),
      metadata: { name, finalizers },
    });
    await client.request('POST', WT, { body: withFinalizers('w1', ['cleanup']) });
    await client.request('POST', WT, { body: withFinalizers('w2', ['cleanup']) });
    await client.request('POST', WT, {
      body: withFinalizers('w3', ['cleanup', 'hookgate.dev/cleanup']),
    });
    const unknown = trigger('w4', { bogus: 1 });
    await client.request('POST', WT, { body: unknown });
    expect(warnings).toEqual([
      'metadata.finalizers: "cleanup": prefer a domain-qualified finalizer name to avoid accidental conflicts with other finalizer writers',
      'unknown field "spec.bogus"',
    ]);
    // A second client reports them again: the memory is per client.
    const other: string[] = [];
    await new KubeClient(cluster.kc, { onWarning: (m) => other.push(m) }).request('POST', WT, {
      body: withFinalizers('w5', ['cleanup']),
    });
    expect(other).toHaveLength(1);
  });
});
