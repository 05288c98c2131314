// The in-memory Kubernetes API server with a kubeconfig and a client, for operator
// tests: `await startTestCluster()` in beforeAll, `cluster.close()` in afterAll.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { KubeClient } from '../../operator/controller/kube-client.ts';
import { startKubeApiServer, type KubeApiServer } from '../../testing/kube-apiserver/index.ts';

export interface TestCluster {
  server: KubeApiServer;
  dir: string;
  kubeconfig: string;
  kc: KubeConfig;
  client: KubeClient;
  close(): Promise<void>;
}

export async function startTestCluster(options: { crds?: boolean } = {}): Promise<TestCluster> {
  const server = await startKubeApiServer();
  const dir = mkdtempSync(join(tmpdir(), 'hookgate-cluster-'));
  const kubeconfig = server.writeKubeconfig(dir);
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  if (options.crds) server.applyCrdsFrom(join(import.meta.dirname, '..', '..', 'crds'));
  return {
    server,
    dir,
    kubeconfig,
    kc,
    client: new KubeClient(kc),
    async close() {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
