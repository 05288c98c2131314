// The in-memory Kubernetes API server with a kubeconfig and a client, for operator
// tests: `await startTestCluster()` in beforeAll, `cluster.close()` in afterAll.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { KubeClient } from '../../operator/controller/kube-client.ts';
import {
  startKubeApiServer,
  type KubeApiServer,
  type KubeApiServerOptions,
} from '../../testing/kube-apiserver/index.ts';

export interface TestCluster {
  server: KubeApiServer;
  dir: string;
  kubeconfig: string;
  kc: KubeConfig;
  client: KubeClient;
  close(): Promise<void>;
}

export async function startTestCluster(
  options: { crds?: boolean; server?: KubeApiServerOptions } = {},
): Promise<TestCluster> {
  const server = await startKubeApiServer(options.server);
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

/**
 * Starts `hookgate <role>` as its own process against the test cluster and a Redis: the
 * public listener on `port`, the admin one on `port + 100` with the static token in
 * `<cluster.dir>/admin-token` (the test writes it). `env` adds or overrides variables.
 */
export function spawnRole(
  cluster: TestCluster,
  redisUrl: string,
  role: 'operator' | 'gateway' | 'worker',
  port: number,
  env: Record<string, string> = {},
): ChildProcess {
  return spawn(
    process.execPath,
    [join(import.meta.dirname, '..', '..', 'roles', 'cli.ts'), role, '--port', String(port)],
    {
      env: {
        ...process.env,
        ADMIN_PORT: String(port + 100),
        HOOKGATE_ADMIN_AUTH: 'token',
        HOOKGATE_ADMIN_TOKEN_FILE: join(cluster.dir, 'admin-token'),
        KUBECONFIG: cluster.kubeconfig,
        REDIS_URL: redisUrl,
        LOG_LEVEL: 'warn',
        HOOKGATE_BASE_URL: 'https://hooks.test',
        ...env,
      },
      stdio: 'ignore',
    },
  );
}
