// `helm upgrade` that would change the chart Redis's volumeClaimTemplates (or selector)
// fails at render time, naming the value and the procedure, instead of failing on the
// StatefulSet after other objects changed (Kubernetes forbids that update). The check
// `lookup`s the installed StatefulSet: here from the in-memory API server, with
// --dry-run=server (what helm install/upgrade do). That server speaks JSON only, and
// helm stores releases with protobuf, so a real `helm upgrade` cannot run against it;
// `helm template --dry-run=server` renders exactly what an upgrade would.
import { cpSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKubeApiServer, type KubeApiServer } from '../../testing/kube-apiserver/index.ts';
import { kubeToolEnv } from '../support/kube-tools.ts';
import {
  FULLNAME,
  NAMESPACE,
  RELEASE,
  chartDir,
  find,
  helm,
  render,
  setArgs,
  tools,
  type StatefulSet,
} from './chart.ts';

const REDIS = `${FULLNAME}-redis`;
const STATEFULSETS = `/apis/apps/v1/namespaces/${NAMESPACE}/statefulsets`;

describe.skipIf(!tools)('the chart Redis volume on upgrade', () => {
  let server: KubeApiServer;
  let dir: string;
  let env: NodeJS.ProcessEnv;
  let chart: string;

  const send = async (method: string, path: string, body?: object): Promise<void> => {
    const response = await fetch(`${server.url}${path}`, {
      method,
      headers: { 'content-type': 'application/json' },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    expect(response.ok, `${method} ${path}: ${await response.text()}`).toBe(true);
  };

  /** `helm template --dry-run=server` (lookup reads the cluster): helm's exit code and stderr. */
  const upgrade = async (...sets: string[]): Promise<{ code: number; stderr: string }> => {
    const args = ['template', RELEASE, chart, '--namespace', NAMESPACE, '--dry-run=server'];
    const r = await helm([...args, ...setArgs(sets)], env);
    return { code: r.code, stderr: r.stderr };
  };

  /** What helm install leaves in the cluster: the StatefulSet these values render, owned by the release. */
  const install = async (edit: (sts: StatefulSet) => void = () => {}, ...sets: string[]) => {
    const sts = structuredClone(redisOf(await render(...sets)));
    sts.metadata.annotations = {
      'meta.helm.sh/release-name': RELEASE,
      'meta.helm.sh/release-namespace': NAMESPACE,
    };
    edit(sts);
    await send('POST', STATEFULSETS, sts);
  };
  const uninstall = () => send('DELETE', `${STATEFULSETS}/${REDIS}`);

  beforeAll(async () => {
    server = await startKubeApiServer();
    dir = mkdtempSync(join(tmpdir(), 'hookgate-redis-volume-'));
    env = kubeToolEnv(dir, server.writeKubeconfig(dir));
    await send('POST', '/api/v1/namespaces', {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: NAMESPACE },
    });
    // The in-memory server serves ConfigMaps and StatefulSets but not the chart's other
    // kinds, which helm maps with --dry-run=server: the Redis templates and the helpers.
    chart = join(dir, 'hookgate');
    cpSync(chartDir, chart, { recursive: true });
    for (const file of readdirSync(join(chart, 'templates'))) {
      const kept = ['configmap-redis.yaml', 'statefulset-redis.yaml'];
      if (!file.endsWith('.tpl') && !kept.includes(file)) rmSync(join(chart, 'templates', file));
    }
  });

  afterAll(async () => {
    await server?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('fails a changed redis.persistence.size before anything changes, naming the procedure', async () => {
    await install();
    try {
      expect((await upgrade()).code).toBe(0);
      expect((await upgrade('redis.maxmemory=2gb', 'redis.resources.limits.memory=3Gi')).code).toBe(
        0,
      );
      const grown = await upgrade('redis.persistence.size=16Gi', 'redis.maxmemory=2gb');
      expect(grown.code).not.toBe(0);
      expect(grown.stderr).toContain(
        'redis.persistence.size is 16Gi, but the installed Redis volume was claimed with 8Gi.',
      );
      expect(grown.stderr).toContain(`PersistentVolumeClaim data-${REDIS}-0`);
      expect(grown.stderr).toContain(
        `kubectl -n ${NAMESPACE} delete statefulset ${REDIS} --cascade=orphan`,
      );
      expect(grown.stderr).toContain('chart README, "Redis volume"');
      // The same size written otherwise is no change.
      expect((await upgrade('redis.persistence.size=8192Mi')).code).toBe(0);
    } finally {
      await uninstall();
    }
  });

  it('compares quantities, not their spelling: the API server keeps the canonical form', async () => {
    // Installed with 1024Mi; the API server stores it as 1Gi.
    await install((sts) => {
      const [claim] = sts.spec.volumeClaimTemplates;
      if (claim) claim.spec.resources.requests.storage = '1Gi';
    }, 'redis.persistence.size=1024Mi');
    try {
      expect((await upgrade('redis.persistence.size=1024Mi')).code).toBe(0);
      expect((await upgrade('redis.persistence.size=1Gi')).code).toBe(0);
      const shrunk = await upgrade('redis.persistence.size=1000Mi');
      expect(shrunk.stderr).toContain(
        'redis.persistence.size is 1000Mi, but the installed Redis volume was claimed with 1Gi.',
      );
    } finally {
      await uninstall();
    }
  });

  it('fails a changed redis.persistence.storageClass', async () => {
    await install(() => {}, 'redis.persistence.storageClass=standard');
    try {
      expect((await upgrade('redis.persistence.storageClass=standard')).code).toBe(0);
      const moved = await upgrade('redis.persistence.storageClass=fast');
      expect(moved.code).not.toBe(0);
      expect(moved.stderr).toContain(
        'redis.persistence.storageClass is "fast", but the installed Redis volume was claimed with "standard".',
      );
      expect(moved.stderr).toContain('a volume cannot move to another StorageClass in place');
      const unset = await upgrade();
      expect(unset.stderr).toContain(
        `redis.persistence.storageClass is empty (the cluster's default class), but the installed Redis volume was claimed with "standard".`,
      );
    } finally {
      await uninstall();
    }
  });

  it('fails a nameOverride that would change the selector', async () => {
    await install(() => {}, `fullnameOverride=${FULLNAME}`);
    try {
      expect((await upgrade(`fullnameOverride=${FULLNAME}`)).code).toBe(0);
      const renamed = await upgrade(`fullnameOverride=${FULLNAME}`, 'nameOverride=hooks');
      expect(renamed.code).not.toBe(0);
      expect(renamed.stderr).toContain("the Redis StatefulSet's selector would change");
      expect(renamed.stderr).toContain('"app.kubernetes.io/name":"hooks"');
    } finally {
      await uninstall();
    }
  });

  it('checks nothing without an installed StatefulSet (a first install, or after kubectl delete --cascade=orphan) nor under helm template', async () => {
    expect((await upgrade('redis.persistence.size=16Gi')).code).toBe(0);
    // `helm template` (no cluster): lookup answers nothing, the render goes on.
    const sts = redisOf(await render('redis.persistence.size=16Gi'));
    expect(sts.spec.volumeClaimTemplates[0]?.spec.resources.requests.storage).toBe('16Gi');
  });
});

function redisOf(objects: Awaited<ReturnType<typeof render>>): StatefulSet {
  return find<StatefulSet>(objects, 'StatefulSet', REDIS);
}
