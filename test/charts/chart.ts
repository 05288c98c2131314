// Rendering charts/hookgate with a real helm v4 for the chart suites: the binary comes
// from kube-tools (test/support/kube-tools.ts); without it `tools` is undefined and the
// suites skip loudly (under CI=true they fail instead). Importing this module from a test
// file registers the clean-up of its temp dir.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments, stringify } from 'yaml';
import { afterAll, expect } from 'vitest';
import { kubeToolEnv, kubeToolsOrSkip } from '../support/kube-tools.ts';

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const chartDir = join(repoRoot, 'charts', 'hookgate');
export const RELEASE = 'hg';
export const NAMESPACE = 'hooks';
/** The release's object name prefix ("hookgate.fullname"). */
export const FULLNAME = `${RELEASE}-hookgate`;
export const ROLES = ['operator', 'gateway', 'worker'] as const;

/** REDIS_URL of the roles with the chart's Redis ($(REDIS_PASSWORD) expanded by the kubelet). */
export const CHART_REDIS_URL = `redis://:$(REDIS_PASSWORD)@${FULLNAME}-redis.${NAMESPACE}.svc:6379`;
/** Every opt-in on (what the documented options add). */
export const ALL_OPT_INS = [
  'metrics.serviceMonitor.enabled=true',
  'networkPolicy.enabled=true',
  // The admin Ingress's controller must be let in: the default admits the namespace only.
  'networkPolicy.adminFrom[0].namespaceSelector.matchLabels.name=ingress-nginx',
  'podDisruptionBudget.enabled=true',
  'ingress.enabled=true',
  'ingress.host=hooks.example.com',
  'ingress.tls.enabled=true',
  'admin.ingress.enabled=true',
];
/** A Redis of your own, its URL in a Secret, instead of the chart's. */
export const EXTERNAL_REDIS_SECRET = [
  'redis.enabled=false',
  'externalRedis.existingSecret.name=my-redis',
];

export interface Metadata {
  name: string;
  namespace?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: Metadata;
  [key: string]: unknown;
}
export interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: {
    secretKeyRef?: { name: string; key: string };
    fieldRef?: { fieldPath: string };
  };
}
export interface Probe {
  httpGet?: { path: string; port: string };
  exec?: { command: string[] };
  initialDelaySeconds?: number;
  periodSeconds?: number;
  timeoutSeconds?: number;
  failureThreshold?: number;
}
export interface ContainerSecurityContext {
  runAsNonRoot: boolean;
  runAsUser: number;
  runAsGroup: number;
  allowPrivilegeEscalation: boolean;
  readOnlyRootFilesystem: boolean;
  capabilities: { drop: string[] };
  seccompProfile: { type: string };
}
export interface Container {
  name: string;
  image: string;
  imagePullPolicy: string;
  command?: string[];
  args: string[];
  ports: { name: string; containerPort: number; protocol: string }[];
  env: EnvVar[];
  readinessProbe: Probe;
  livenessProbe: Probe;
  lifecycle?: { preStop?: { sleep?: { seconds: number } } };
  resources: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext: ContainerSecurityContext;
  volumeMounts: { name: string; mountPath: string; readOnly?: boolean }[];
}
export interface PodSpec {
  serviceAccountName: string;
  automountServiceAccountToken: boolean;
  enableServiceLinks?: boolean;
  terminationGracePeriodSeconds: number;
  topologySpreadConstraints?: unknown[];
  securityContext: {
    runAsNonRoot: boolean;
    runAsUser: number;
    runAsGroup: number;
    fsGroup: number;
    fsGroupChangePolicy?: string;
    seccompProfile: { type: string };
  };
  imagePullSecrets?: { name: string }[];
  nodeSelector?: Record<string, string>;
  tolerations?: unknown[];
  containers: Container[];
  volumes: {
    name: string;
    emptyDir?: { sizeLimit?: string };
    configMap?: { name: string };
    secret?: { secretName: string; items?: { key: string; path: string }[] };
  }[];
}
export interface PodTemplate {
  metadata: { labels: Record<string, string>; annotations?: Record<string, string> };
  spec: PodSpec;
}
export interface Deployment extends K8sObject {
  spec: {
    replicas: number;
    strategy?: { type: string };
    selector: { matchLabels: Record<string, string> };
    template: PodTemplate;
  };
}
export interface StatefulSet extends K8sObject {
  spec: {
    replicas: number;
    serviceName: string;
    selector: { matchLabels: Record<string, string> };
    persistentVolumeClaimRetentionPolicy: { whenDeleted: string; whenScaled: string };
    template: PodTemplate;
    volumeClaimTemplates: {
      metadata: { name: string; labels?: Record<string, string> };
      spec: {
        accessModes: string[];
        storageClassName?: string;
        resources: { requests: { storage: string } };
      };
    }[];
  };
}
export interface Service extends K8sObject {
  spec: {
    type?: string;
    clusterIP?: string;
    selector: Record<string, string>;
    ports: { name: string; port: number; targetPort: string; protocol: string }[];
  };
}
export interface ConfigMap extends K8sObject {
  data: Record<string, string>;
}
export interface Secret extends K8sObject {
  type: string;
  data: Record<string, string>;
}

export const tools = await kubeToolsOrSkip();
export const work = mkdtempSync(join(tmpdir(), 'hookgate-helm-'));
/** HELM_CACHE_HOME, HELM_CONFIG_HOME, HELM_DATA_HOME (and HOME) under the temp dir; no cluster. */
export const helmEnv = kubeToolEnv(work, join(work, 'no-kubeconfig'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

export interface HelmResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function helm(args: string[], env: NodeJS.ProcessEnv = helmEnv): Promise<HelmResult> {
  return new Promise((done) => {
    execFile(
      tools?.helm ?? 'helm-missing',
      args,
      { env, timeout: 20_000, maxBuffer: 32 * 1024 * 1024 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        done({ code, stdout, stderr });
      },
    );
  });
}

export function setArgs(sets: string[]): string[] {
  return sets.flatMap((s) => ['--set', s]);
}

export function templateArgs(sets: string[], release = RELEASE): string[] {
  return ['template', release, chartDir, '--namespace', NAMESPACE, ...setArgs(sets)];
}

/** `helm install --dry-run=client` with the given --set values (schema checks, NOTES). */
export function dryRunInstall(...sets: string[]): Promise<HelmResult> {
  return helm([
    'install',
    RELEASE,
    chartDir,
    '--namespace',
    NAMESPACE,
    '--dry-run=client',
    ...setArgs(sets),
  ]);
}

export function parseObjects(yaml: string): K8sObject[] {
  const objects: K8sObject[] = [];
  for (const doc of parseAllDocuments(yaml)) {
    if (doc.errors.length > 0) throw new Error(`invalid YAML from helm: ${doc.errors[0]?.message}`);
    const value = doc.toJS() as K8sObject | null;
    if (value) objects.push(value);
  }
  return objects;
}

const rendered = new Map<string, Promise<K8sObject[]>>();

/**
 * `helm template` with the given --set values; every rendered object, parsed. Memoised
 * per argument list (each helm run costs ~0.3 s here); callers must not mutate the result.
 */
export function render(...sets: string[]): Promise<K8sObject[]> {
  const key = JSON.stringify(sets);
  let pending = rendered.get(key);
  if (!pending) {
    pending = renderArgs(templateArgs(sets));
    rendered.set(key, pending);
  }
  return pending;
}

/** Runs helm with the arguments (a `template` or `install --dry-run`), parses its objects. */
export async function renderArgs(args: string[], env?: NodeJS.ProcessEnv): Promise<K8sObject[]> {
  const r = await helm(args, env);
  if (r.code !== 0) throw new Error(`helm ${args[0]} failed (${r.code}): ${r.stderr}`);
  return parseObjects(r.stdout);
}

/** `helm template` that must fail: its stderr. */
export async function renderError(...sets: string[]): Promise<string> {
  const r = await helm(templateArgs(sets));
  expect(r.code, `helm template unexpectedly succeeded with ${sets.join(' ')}`).not.toBe(0);
  return r.stderr;
}

let valuesFiles = 0;

/** Writes `content` as YAML to a new file in the temp dir: a values file for `-f`. */
export function valuesFile(content: unknown): string {
  const file = join(work, `values-${++valuesFiles}.yaml`);
  writeFileSync(file, stringify(content));
  return file;
}

/** `helm template` with the --set values and a values file (`content` as YAML); not memoised. */
export function renderWithValues(sets: string[], content: unknown): Promise<K8sObject[]> {
  return renderArgs([...templateArgs(sets), '-f', valuesFile(content)]);
}

/** `helm template` with the --set values and a values file that must fail: its stderr. */
export async function renderValuesError(sets: string[], content: unknown): Promise<string> {
  const r = await helm([...templateArgs(sets), '-f', valuesFile(content)]);
  expect(r.code, 'helm template unexpectedly succeeded').not.toBe(0);
  return r.stderr;
}

export function kinds(objects: K8sObject[]): string[] {
  return objects.map((o) => o.kind).sort();
}

export function names(objects: K8sObject[]): string[] {
  return objects.map((o) => `${o.kind}/${o.metadata.name}`).sort();
}

export function find<T extends K8sObject>(objects: K8sObject[], kind: string, name: string): T {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) throw new Error(`no ${kind}/${name} rendered; have: ${names(objects).join(', ')}`);
  return found as T;
}

export function deployment(objects: K8sObject[], role: string): Deployment {
  return find<Deployment>(objects, 'Deployment', `${FULLNAME}-${role}`);
}

export function redisStatefulSet(objects: K8sObject[]): StatefulSet {
  return find<StatefulSet>(objects, 'StatefulSet', `${FULLNAME}-redis`);
}

export function container(workload: Deployment | StatefulSet): Container {
  const [c] = workload.spec.template.spec.containers;
  if (!c) throw new Error(`${workload.metadata.name} has no container`);
  return c;
}

export function envOf(c: Container): Map<string, EnvVar> {
  return new Map(c.env.map((e) => [e.name, e]));
}
