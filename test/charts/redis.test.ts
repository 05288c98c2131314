// The chart's Redis (redis.enabled, the default) and externalRedis: the objects helm
// renders, the password kept across upgrades (`lookup`, against the in-memory API
// server), and the rendered redis.conf and probes run by a real redis-server: the
// append-only file keeps acknowledged writes across a restart, noeviction refuses writes
// instead of dropping keys, the probes tell a good password from a bad one.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { startKubeApiServer } from '../../testing/kube-apiserver/index.ts';
import { kubeToolEnv } from '../support/kube-tools.ts';
import { redisAvailable, redisServerPath } from '../support/redis.ts';
import {
  CHART_REDIS_URL,
  EXTERNAL_REDIS_SECRET,
  FULLNAME,
  NAMESPACE,
  RELEASE,
  ROLES,
  chartDir,
  container,
  deployment,
  envOf,
  find,
  names,
  redisStatefulSet,
  render,
  renderArgs,
  renderError,
  setArgs,
  templateArgs,
  tools,
  type ConfigMap,
  type Container,
  type K8sObject,
  type Secret,
  type Service,
} from './chart.ts';

const REDIS = `${FULLNAME}-redis`;

interface NetworkPolicy extends K8sObject {
  spec: {
    podSelector: { matchLabels: Record<string, string> };
    policyTypes: string[];
    ingress: unknown[];
    egress?: unknown[];
  };
}

function redisConf(objects: K8sObject[]): string {
  const conf = find<ConfigMap>(objects, 'ConfigMap', REDIS).data['redis.conf'];
  if (conf === undefined) throw new Error('no redis.conf in the ConfigMap');
  return conf;
}

/** The directives of a redis.conf, comments and blank lines left out. */
function directives(conf: string): string[] {
  return conf
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
}

/**
 * The argv the kubelet starts: command and args with $(VAR) expanded from the
 * container's env (as the kubelet does; `$$` escapes a `$`), given the values of the
 * variables that come from Secrets. The image's entrypoint only execs it (uid 999).
 */
function kubeletArgv(c: Container, secrets: Record<string, string>): string[] {
  const values = new Map<string, string>();
  for (const e of c.env) {
    const value = e.value !== undefined ? expand(e.value, values) : secrets[e.name];
    if (value !== undefined) values.set(e.name, value);
  }
  return [...(c.command ?? []), ...c.args].map((part) => expand(part, values));
}

function expand(text: string, values: Map<string, string>): string {
  return text.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (whole, name?: string) =>
    name === undefined ? '$' : (values.get(name) ?? whole),
  );
}

function password(secret: Secret, key = 'redis-password'): string {
  const data = secret.data[key];
  if (data === undefined) throw new Error(`Secret ${secret.metadata.name} has no ${key}`);
  return Buffer.from(data, 'base64').toString('utf8');
}

describe.skipIf(!tools)('the chart Redis (redis.enabled)', () => {
  it('runs one Redis replica with its append-only file on a PersistentVolumeClaim', async () => {
    const objects = await render();
    const sts = redisStatefulSet(objects);
    expect(sts.metadata.labels?.['app.kubernetes.io/component']).toBe('redis');
    expect(sts.spec.replicas).toBe(1);
    expect(sts.spec.serviceName).toBe(REDIS);
    expect(sts.spec.selector.matchLabels).toEqual({
      'app.kubernetes.io/name': 'hookgate',
      'app.kubernetes.io/instance': RELEASE,
      'app.kubernetes.io/component': 'redis',
    });
    expect(sts.spec.template.metadata.labels).toMatchObject(sts.spec.selector.matchLabels);
    // Neither uninstalling nor scaling down deletes the queued work.
    expect(sts.spec.persistentVolumeClaimRetentionPolicy).toEqual({
      whenDeleted: 'Retain',
      whenScaled: 'Retain',
    });
    expect(sts.spec.volumeClaimTemplates).toEqual([
      {
        metadata: { name: 'data', labels: sts.spec.selector.matchLabels },
        spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '8Gi' } } },
      },
    ]);
    const sized = redisStatefulSet(
      await render('redis.persistence.size=20Gi', 'redis.persistence.storageClass=fast-ssd'),
    );
    expect(sized.spec.volumeClaimTemplates[0]?.spec).toEqual({
      accessModes: ['ReadWriteOnce'],
      storageClassName: 'fast-ssd',
      resources: { requests: { storage: '20Gi' } },
    });

    const c = container(sts);
    expect(c.image).toBe('docker.io/library/redis:7.2.11');
    expect(c.imagePullPolicy).toBe('IfNotPresent');
    // The password comes from the Secret in the environment, never on a command line
    // (ps, /proc/<pid>/cmdline, a node agent's exec log): the container's shell hands it
    // to redis-server on stdin (the run below starts exactly this command).
    expect(c.command).toBeUndefined();
    expect(c.args.slice(0, 2)).toEqual(['sh', '-c']);
    expect(c.args).toHaveLength(3);
    expect(c.args[2]).toContain('exec redis-server /etc/redis/redis.conf - <<EOF');
    expect(kubeletArgv(c, { REDIS_PASSWORD: 'p4ss' }).join(' ')).not.toContain('p4ss');
    expect(c.env).toEqual([
      {
        name: 'REDIS_PASSWORD',
        valueFrom: { secretKeyRef: { name: REDIS, key: 'redis-password' } },
      },
      { name: 'REDISCLI_AUTH', value: '$(REDIS_PASSWORD)' },
    ]);
    expect(c.ports).toEqual([{ name: 'redis', containerPort: 6379, protocol: 'TCP' }]);
    expect(c.volumeMounts).toEqual([
      { name: 'data', mountPath: '/data' },
      { name: 'config', mountPath: '/etc/redis', readOnly: true },
      { name: 'tmp', mountPath: '/tmp' },
    ]);
    const pod = sts.spec.template.spec;
    expect(pod.volumes).toEqual([
      { name: 'config', configMap: { name: REDIS } },
      { name: 'tmp', emptyDir: { sizeLimit: '64Mi' } },
    ]);
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(pod.enableServiceLinks).toBe(false);
    // Memory: request = limit, above maxmemory (1gb) for the rewrite's fork; no CPU limit.
    expect(c.resources).toEqual({
      requests: { cpu: '100m', memory: '1536Mi' },
      limits: { memory: '1536Mi' },
    });
  });

  it("runs Redis as the image's redis user (999), read-only root, no capabilities", async () => {
    const sts = redisStatefulSet(await render());
    expect(sts.spec.template.spec.securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: 999,
      runAsGroup: 999,
      fsGroup: 999,
      fsGroupChangePolicy: 'OnRootMismatch',
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(container(sts).securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: 999,
      runAsGroup: 999,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    });
  });

  it('configures append-only persistence, maxmemory with noeviction, and no password in the file', async () => {
    const objects = await render();
    const conf = directives(redisConf(objects));
    for (const line of [
      'dir /data',
      'appendonly yes',
      'appendfsync everysec',
      'save ""',
      'maxmemory 1gb',
      'maxmemory-policy noeviction',
      'port 6379',
    ]) {
      expect(conf, line).toContain(line);
    }
    expect(conf.join('\n')).not.toMatch(/requirepass|masterauth/);

    // A new redis.conf restarts Redis: the pod template carries its checksum.
    const checksum = (objects: K8sObject[]) =>
      redisStatefulSet(objects).spec.template.metadata.annotations?.['checksum/config'];
    const bigger = await render('redis.maxmemory=2gb');
    expect(directives(redisConf(bigger))).toContain('maxmemory 2gb');
    expect(checksum(bigger)).toMatch(/^[0-9a-f]{64}$/);
    expect(checksum(bigger)).not.toBe(checksum(objects));
  });

  it('keeps the Redis pod template when only the chart version changes (no restart on upgrade)', async () => {
    // The chart at another version and appVersion, as a release upgrade would bring it.
    const bumped = mkdtempSync(join(tmpdir(), 'hookgate-chart-'));
    try {
      cpSync(chartDir, bumped, { recursive: true });
      const chartYaml = join(bumped, 'Chart.yaml');
      writeFileSync(
        chartYaml,
        readFileSync(chartYaml, 'utf8')
          .replace(/^version: .*$/m, 'version: 9.8.7')
          .replace(/^appVersion: .*$/m, 'appVersion: 9.8.7'),
      );
      const before = redisStatefulSet(await render());
      const after = redisStatefulSet(
        await renderArgs(['template', RELEASE, bumped, '--namespace', NAMESPACE]),
      );
      // The StatefulSet object may say which chart made it; its pods must not.
      expect(after.metadata.labels?.['helm.sh/chart']).toBe('hookgate-9.8.7');
      expect(after.spec.template).toEqual(before.spec.template);
      const labels = before.spec.template.metadata.labels;
      expect(labels).not.toHaveProperty('helm.sh/chart');
      expect(labels).not.toHaveProperty('app.kubernetes.io/version');
      expect(labels).toMatchObject({
        ...before.spec.selector.matchLabels,
        'app.kubernetes.io/part-of': 'hookgate',
        'app.kubernetes.io/managed-by': 'Helm',
      });
    } finally {
      rmSync(bumped, { recursive: true, force: true });
    }
  });

  it('serves Redis through a headless Service that the roles reach with the password', async () => {
    const objects = await render();
    const svc = find<Service>(objects, 'Service', REDIS);
    expect(svc.spec.clusterIP).toBe('None');
    expect(svc.spec.selector).toEqual(redisStatefulSet(objects).spec.selector.matchLabels);
    expect(svc.spec.ports).toEqual([
      { name: 'redis', port: 6379, targetPort: 'redis', protocol: 'TCP' },
    ]);
    for (const role of ROLES) {
      const e = envOf(container(deployment(objects, role)));
      expect(e.get('REDIS_URL')?.value, role).toBe(CHART_REDIS_URL);
      expect(e.get('REDIS_PASSWORD')?.valueFrom?.secretKeyRef).toEqual({
        name: REDIS,
        key: 'redis-password',
      });
    }
  });

  it('generates a 32-character password, or uses the Secret given in redis.auth', async () => {
    const secret = find<Secret>(await render(), 'Secret', REDIS);
    expect(secret.type).toBe('Opaque');
    expect(Object.keys(secret.data)).toEqual(['redis-password']);
    expect(password(secret)).toMatch(/^[A-Za-z0-9]{32}$/);
    // Without a cluster to look it up in (`helm template`, as Argo CD renders) every render
    // is a new password: README, "Password", says to pin it with redis.auth.existingSecret.
    const again = find<Secret>(await renderArgs(templateArgs([])), 'Secret', REDIS);
    expect(password(again)).not.toBe(password(secret));

    const given = await render(
      'redis.auth.existingSecret=redis-auth',
      'redis.auth.existingSecretKey=pw',
    );
    expect(given.filter((o) => o.kind === 'Secret')).toEqual([]);
    expect(envOf(container(redisStatefulSet(given))).get('REDIS_PASSWORD')).toEqual({
      name: 'REDIS_PASSWORD',
      valueFrom: { secretKeyRef: { name: 'redis-auth', key: 'pw' } },
    });
    for (const role of ROLES) {
      expect(
        envOf(container(deployment(given, role))).get('REDIS_PASSWORD')?.valueFrom?.secretKeyRef,
      ).toEqual({ name: 'redis-auth', key: 'pw' });
    }
  });

  it('keeps the password of an installed release on upgrade (lookup against the cluster)', async () => {
    const server = await startKubeApiServer();
    const dir = mkdtempSync(join(tmpdir(), 'hookgate-lookup-'));
    try {
      const env = kubeToolEnv(dir, server.writeKubeconfig(dir));
      const post = async (path: string, body: object): Promise<void> => {
        const response = await fetch(`${server.url}${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        expect(response.status, await response.text()).toBe(201);
      };
      await post('/api/v1/namespaces', {
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: { name: NAMESPACE },
      });
      // --dry-run=server lets `lookup` read the cluster, as helm install/upgrade and
      // Pulumi's Chart v4 do. The in-memory server serves Secrets but not Deployments,
      // which helm would map too: the chart is rendered with its Secret template (and the
      // helpers) only.
      const chart = join(dir, 'hookgate');
      cpSync(chartDir, chart, { recursive: true });
      for (const file of readdirSync(join(chart, 'templates'))) {
        if (file !== '_helpers.tpl' && file !== 'secret-redis.yaml') {
          rmSync(join(chart, 'templates', file));
        }
      }
      const render = async (...sets: string[]): Promise<Secret> => {
        const args = ['template', RELEASE, chart, '--namespace', NAMESPACE, '--dry-run=server'];
        const objects = await renderArgs([...args, ...setArgs(sets)], env);
        return find<Secret>(objects, 'Secret', REDIS);
      };
      const upgrade = async (...sets: string[]): Promise<string> => password(await render(...sets));
      const first = await upgrade();
      expect(await upgrade()).not.toBe(first); // nothing installed yet: a new one each time
      const installed = await render();
      // What helm install leaves in the cluster: the object, owned by the release.
      await post(`/api/v1/namespaces/${NAMESPACE}/secrets`, {
        ...installed,
        metadata: {
          ...installed.metadata,
          annotations: {
            'meta.helm.sh/release-name': RELEASE,
            'meta.helm.sh/release-namespace': NAMESPACE,
          },
        },
      });
      const kept = password(installed);
      expect(await upgrade()).toBe(kept);
      expect(await upgrade('redis.maxmemory=2gb', 'gateway.replicas=4')).toBe(kept);
    } finally {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('lets only the release’s hookgate pods reach Redis when networkPolicy.enabled', async () => {
    const objects = await render('networkPolicy.enabled=true');
    const np = find<NetworkPolicy>(objects, 'NetworkPolicy', REDIS);
    expect(np.spec.podSelector).toEqual({
      matchLabels: redisStatefulSet(objects).spec.selector.matchLabels,
    });
    // Egress listed with no rule: Redis connects nowhere.
    expect(np.spec.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(np.spec.egress).toBeUndefined();
    expect(np.spec.ingress).toEqual([
      {
        from: [
          {
            podSelector: {
              matchLabels: {
                'app.kubernetes.io/name': 'hookgate',
                'app.kubernetes.io/instance': RELEASE,
              },
              matchExpressions: [
                {
                  key: 'app.kubernetes.io/component',
                  operator: 'In',
                  values: ['operator', 'gateway', 'worker'],
                },
              ],
            },
          },
        ],
        ports: [{ port: 'redis', protocol: 'TCP' }],
      },
    ]);
  });

  it('schedules Redis with its own nodeSelector, tolerations and pod annotations', async () => {
    const sts = redisStatefulSet(
      await render(
        'redis.nodeSelector.disk=ssd',
        'redis.tolerations[0].key=dedicated',
        'redis.tolerations[0].operator=Exists',
        'redis.podAnnotations.backup=daily',
        'imagePullSecrets[0].name=regcred',
      ),
    );
    const pod = sts.spec.template;
    expect(pod.spec.nodeSelector).toEqual({ disk: 'ssd' });
    expect(pod.spec.tolerations).toEqual([{ key: 'dedicated', operator: 'Exists' }]);
    expect(pod.spec.imagePullSecrets).toEqual([{ name: 'regcred' }]);
    expect(pod.metadata.annotations).toMatchObject({ backup: 'daily' });
    expect(pod.metadata.annotations).toHaveProperty('checksum/config');
  });
});

describe.skipIf(!tools)('externalRedis', () => {
  it('passes the URL of your Redis, from a Secret or as given, and renders no Redis', async () => {
    const fromSecret = await render(
      ...EXTERNAL_REDIS_SECRET,
      'externalRedis.existingSecret.key=url',
    );
    const asGiven = await render(
      'redis.enabled=false',
      'externalRedis.url=rediss://r.example:6380',
    );
    for (const objects of [fromSecret, asGiven]) {
      expect(names(objects).filter((n) => n.endsWith(`/${REDIS}`))).toEqual([]);
    }
    for (const role of ROLES) {
      const secretEnv = envOf(container(deployment(fromSecret, role)));
      expect(secretEnv.get('REDIS_URL')).toEqual({
        name: 'REDIS_URL',
        valueFrom: { secretKeyRef: { name: 'my-redis', key: 'url' } },
      });
      expect(secretEnv.has('REDIS_PASSWORD')).toBe(false);
      expect(envOf(container(deployment(asGiven, role))).get('REDIS_URL')).toEqual({
        name: 'REDIS_URL',
        value: 'rediss://r.example:6380',
      });
    }
  });

  it('refuses two Redis or none, saying what to set', async () => {
    expect(await renderError('externalRedis.url=redis://r:6379')).toContain(
      'redis.enabled and externalRedis are mutually exclusive: set redis.enabled=false to use externalRedis',
    );
    expect(await renderError('externalRedis.existingSecret.name=my-redis')).toContain(
      'redis.enabled and externalRedis are mutually exclusive',
    );
    expect(await renderError('redis.enabled=false')).toContain(
      'redis.enabled is false: set externalRedis.url or externalRedis.existingSecret.name',
    );
    expect(
      await renderError(...EXTERNAL_REDIS_SECRET, 'externalRedis.url=redis://r:6379'),
    ).toContain('externalRedis: set url or existingSecret.name, not both');
  });

  it('refuses a URL with a password in it: it would be in every pod spec', async () => {
    for (const url of [
      'redis://:s3cret@r.example:6379',
      'rediss://default:s3cret@r.example:6380/0',
    ]) {
      expect(await renderError('redis.enabled=false', `externalRedis.url=${url}`), url).toContain(
        'externalRedis.url carries a password, which would be readable in the pod spec of every role: put the URL in a Secret and set externalRedis.existingSecret.name',
      );
    }
    // A user name alone (or an empty password), a port, a path: no secret.
    for (const url of [
      'redis://hookgate@r.example:6379',
      'redis://hookgate:@r.example:6379',
      'rediss://r.example:6380/2',
    ]) {
      const objects = await render('redis.enabled=false', `externalRedis.url=${url}`);
      expect(envOf(container(deployment(objects, 'gateway'))).get('REDIS_URL')?.value).toBe(url);
    }
  });
});

// ---------------------------------------------------------------------------------------
// The rendered redis.conf and probes, run by a real redis-server (the Debian package: the
// same Redis 7 line as the chart's image).

const hasRedis = redisAvailable();

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

interface RunningRedis {
  child: ChildProcess;
  port: number;
}

/**
 * The Redis container's own command (kubeletArgv) with the chart's redis.conf at
 * confFile, REDIS_PASSWORD and REDISCLI_AUTH in its environment as in the pod.
 */
async function startRedis(
  c: Container,
  confFile: string,
  secret: string,
  port: number,
): Promise<RunningRedis> {
  const [file, ...args] = kubeletArgv(c, { REDIS_PASSWORD: secret }).map((part) =>
    part.replaceAll('/etc/redis/redis.conf', confFile),
  );
  const redisDir = dirname(redisServerPath() ?? '/usr/bin/redis-server');
  const child = spawn(file ?? 'sh', args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      PATH: `${redisDir}:${process.env.PATH ?? '/usr/bin:/bin'}`,
      REDIS_PASSWORD: secret,
      REDISCLI_AUTH: secret,
    },
  });
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`redis-server not ready:\n${output}`)), 10_000);
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
      if (output.includes('Ready to accept connections')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`redis-server exited (${code}):\n${output}`));
    });
  });
  child.stdout?.resume();
  return { child, port };
}

function stop(redis: RunningRedis, signal: NodeJS.Signals): Promise<void> {
  if (redis.child.exitCode !== null || redis.child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    redis.child.once('exit', () => resolve());
    redis.child.kill(signal);
  });
}

/** Runs a probe command as the kubelet would (inside the pod: REDISCLI_AUTH set). */
function probe(command: string[], port: number, auth: string): Promise<number> {
  const [file, ...args] = command.map((part) => part.replaceAll('-p 6379', `-p ${port}`));
  return new Promise((resolve) => {
    execFile(
      file ?? 'sh',
      args,
      { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', REDISCLI_AUTH: auth }, timeout: 10_000 },
      (err) => resolve(err ? (typeof err.code === 'number' ? err.code : 1) : 0),
    );
  });
}

describe.skipIf(!tools || !hasRedis)('the chart Redis, run by a real redis-server', () => {
  const dir = mkdtempSync(join(tmpdir(), 'hookgate-redis-conf-'));
  const running: RunningRedis[] = [];
  afterAll(async () => {
    await Promise.all(running.map((r) => stop(r, 'SIGKILL')));
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps acknowledged writes across a restart, refuses writes at maxmemory, and probes by password', async () => {
    const objects = await render();
    const secret = password(find<Secret>(objects, 'Secret', REDIS));
    const dataDir = mkdtempSync(join(dir, 'data-'));
    // The file as rendered, but for the volume's mount point (Redis changes into `dir`
    // while reading the file, before a --dir argument would apply).
    const conf = redisConf(objects);
    expect(conf).toContain('\ndir /data\n');
    expect(conf).toContain('\nport 6379\n');
    const port = await freePort();
    const confFile = join(dir, 'redis.conf');
    writeFileSync(
      confFile,
      conf
        .replace('\ndir /data\n', `\ndir ${dataDir}\n`)
        .replace('\nport 6379\n', `\nport ${port}\n`),
    );
    const c = container(redisStatefulSet(objects));

    const first = await startRedis(c, confFile, secret, port);
    running.push(first);
    const client = new Redis({ port: first.port, password: secret, maxRetriesPerRequest: 0 });
    client.on('error', () => undefined);
    try {
      expect(await client.config('GET', 'appendonly')).toEqual(['appendonly', 'yes']);
      expect(await client.config('GET', 'appendfsync')).toEqual(['appendfsync', 'everysec']);
      expect(await client.config('GET', 'maxmemory-policy')).toEqual([
        'maxmemory-policy',
        'noeviction',
      ]);
      expect(await client.config('GET', 'maxmemory')).toEqual(['maxmemory', String(1024 ** 3)]);

      // The probes of the StatefulSet, with the pod's password and with a wrong one.
      const readiness = c.readinessProbe.exec?.command ?? [];
      const liveness = c.livenessProbe.exec?.command ?? [];
      expect(await probe(readiness, first.port, secret)).toBe(0);
      expect(await probe(liveness, first.port, secret)).toBe(0);
      expect(await probe(readiness, first.port, 'wrong')).not.toBe(0);
      expect(await probe(liveness, first.port, 'wrong')).not.toBe(0);

      // Acknowledged writes (a queued job) survive a restart: SIGTERM, as the kubelet
      // sends it, flushes the append-only file; no RDB snapshot is written (save "").
      await client.xadd('hookgate:queue:executions', '*', 'job', '{"id":"exec_1"}');
      await client.set('hookgate:exec:exec_1', '{"status":"queued"}');
    } finally {
      client.disconnect();
    }
    await stop(first, 'SIGTERM');
    expect(readdirSync(dataDir).sort()).toEqual(['appendonlydir']);

    const second = await startRedis(c, confFile, secret, port);
    running.push(second);
    const after = new Redis({ port: second.port, password: secret, maxRetriesPerRequest: 0 });
    after.on('error', () => undefined);
    try {
      expect(await after.get('hookgate:exec:exec_1')).toBe('{"status":"queued"}');
      expect(await after.xlen('hookgate:queue:executions')).toBe(1);

      // noeviction: beyond maxmemory writes fail; nothing written before is dropped.
      await after.config('SET', 'maxmemory', '2mb');
      const value = 'x'.repeat(64 * 1024);
      let refused: unknown;
      for (let i = 0; i < 200 && refused === undefined; i++) {
        await after.set(`filler:${i}`, value).catch((err: unknown) => (refused = err));
      }
      expect(String(refused)).toContain('OOM command not allowed');
      expect(await after.get('hookgate:exec:exec_1')).toBe('{"status":"queued"}');
      expect(await after.xlen('hookgate:queue:executions')).toBe(1);
    } finally {
      after.disconnect();
    }
    await stop(second, 'SIGTERM');
  });

  it('takes any password from the Secret without it ever being on a command line', async () => {
    const objects = await render();
    const c = container(redisStatefulSet(objects));
    // What redis.conf would read otherwise: quotes, a backslash, spaces, $, a \\x escape.
    const secret = `p "w'd\\x41 $(id) ${'$'}HOME\\`;
    const port = await freePort();
    const confFile = join(dir, 'redis-any.conf');
    const dataDir = mkdtempSync(join(dir, 'data-'));
    writeFileSync(
      confFile,
      redisConf(objects)
        .replace('\ndir /data\n', `\ndir ${dataDir}\n`)
        .replace('\nport 6379\n', `\nport ${port}\n`),
    );
    const redis = await startRedis(c, confFile, secret, port);
    running.push(redis);
    const client = new Redis({ port, password: secret, maxRetriesPerRequest: 0 });
    client.on('error', () => undefined);
    try {
      expect(await client.ping()).toBe('PONG');
      const [, requirepass] = await client.config('GET', 'requirepass');
      expect(requirepass).toBe(secret);
      // Nothing in /proc to check here: once started, Redis writes its title over its
      // argv and environment. What an exec audit (a node agent) sees is the argv the
      // runtime starts, kubeletArgv, which the render test checks.
      expect(kubeletArgv(c, { REDIS_PASSWORD: secret }).join(' ')).not.toContain("w'd");
      const readiness = c.readinessProbe.exec?.command ?? [];
      expect(await probe(readiness, port, secret)).toBe(0);
      expect(await probe(readiness, port, 'p')).not.toBe(0);
    } finally {
      client.disconnect();
    }
    await stop(redis, 'SIGTERM');

    // A line break cannot be said in redis.conf: refused, saying so, before Redis starts.
    await expect(startRedis(c, confFile, 'one\ntwo', port)).rejects.toThrow(/line break/);
  });
});
