// hookgate get triggers|workflows|executions: a table like kubectl's, from a cluster
// (kubeconfig, @kubernetes/client-node) or from a server's admin API (--server).
// Executions live in the gateway's store, not in the cluster: they need --server.
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { parseServerCommand, outputFormat, positionalsUpTo } from '../command.ts';
import { CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { API_VERSION, WEBHOOK_TRIGGER_PLURAL, WORKFLOW_PLURAL } from '../../api/v1alpha1/index.ts';
import { AdminClient, SERVER_HELP } from '../admin-client.ts';
import { CliError, EXIT, usageError, type ExitCode } from '../errors.ts';
import { age, table } from '../table.ts';

export const GET_HELP = `Usage: hookgate get <triggers|workflows|executions> [name] [options]

Lists resources as a table, from the cluster of your kubeconfig, or from a hookgate
server's admin API with --server. Executions are kept by the gateways: they need
--server.

Options:
  -n, --namespace <ns>     one namespace (default: every namespace you may list)
  -A, --all-namespaces     every namespace you may list (the default; kubectl's spelling)
  -o, --output <format>    table (default), wide, json or yaml
      --kubeconfig <path>  kubeconfig file (default: KUBECONFIG, ~/.kube/config)
      --context <name>     kubeconfig context
      --status <s>         executions: queued, running, succeeded or failed
      --limit <n>          executions: at most this many (default 50)
${SERVER_HELP}

Exit codes: 0 listed, 1 refused (e.g. 403), 2 bad usage, 3 unreachable.`;

const KINDS: Record<string, 'triggers' | 'workflows' | 'executions'> = {
  trigger: 'triggers',
  triggers: 'triggers',
  webhooktrigger: 'triggers',
  webhooktriggers: 'triggers',
  wht: 'triggers',
  workflow: 'workflows',
  workflows: 'workflows',
  wf: 'workflows',
  execution: 'executions',
  executions: 'executions',
  exec: 'executions',
};

/** A resource as both sources give it. */
interface Item {
  namespace: string;
  name: string;
  creationTimestamp?: string;
  spec: Record<string, unknown>;
  status: {
    conditions?: { type: string; status: string; message?: string }[];
    url?: string;
    workflowId?: string;
  };
}

export async function getCommand(argv: string[]): Promise<ExitCode> {
  const parsed = parseServerCommand(argv, GET_HELP, {
    namespace: { type: 'string', short: 'n' },
    output: { type: 'string', short: 'o', default: 'table' },
    kubeconfig: { type: 'string' },
    context: { type: 'string' },
    status: { type: 'string' },
    limit: { type: 'string', default: '50' },
    'all-namespaces': { type: 'boolean', short: 'A' },
  });
  if (!parsed) return EXIT.ok;
  const { values } = parsed;
  const positionals = positionalsUpTo(
    parsed.positionals,
    2,
    'get takes a kind and at most one name',
  );
  const kind = KINDS[(positionals[0] ?? '').toLowerCase()];
  if (!kind) throw usageError('get what? triggers, workflows or executions');
  const name = positionals[1];
  outputFormat(values.output, ['table', 'wide', 'json', 'yaml']);
  const useServer = (values.server ?? process.env.HOOKGATE_SERVER ?? '') !== '';
  if (kind === 'executions') {
    if (!useServer) throw usageError('executions are kept by the gateways: name one with --server');
    const rows = await executions(new AdminClient(values), values);
    print(values.output, rows, executionTable);
    return EXIT.ok;
  }
  let items = useServer
    ? await fromServer(new AdminClient(values), kind, values.namespace)
    : await fromCluster(kind, values);
  if (name) {
    items = items.filter((i) => i.name === name);
    if (items.length === 0)
      throw new CliError(EXIT.failed, `${kind.slice(0, -1)} "${name}" not found`);
  }
  print(values.output, items, kind === 'triggers' ? triggerTable : workflowTable);
  return EXIT.ok;
}

function print<T>(output: string, items: T[], render: (items: T[], wide: boolean) => string): void {
  if (output === 'json') console.log(JSON.stringify({ items }, null, 2));
  else if (output === 'yaml') process.stdout.write(stringify({ items }));
  else if (items.length === 0) console.error('No resources found.');
  else console.log(render(items, output === 'wide'));
}

async function fromServer(
  client: AdminClient,
  kind: 'triggers' | 'workflows',
  namespace: string | undefined,
): Promise<Item[]> {
  const { items } = await client.json<{ items: Item[] }>(`/api/${kind}`);
  return items.filter((i) => !namespace || i.namespace === namespace);
}

async function fromCluster(
  kind: 'triggers' | 'workflows',
  values: {
    namespace?: string | undefined;
    kubeconfig?: string | undefined;
    context?: string | undefined;
  },
): Promise<Item[]> {
  const kc = new KubeConfig();
  if (!values.kubeconfig && !defaultKubeconfigFound()) {
    throw usageError(
      'no kubeconfig: KUBECONFIG is not set, ~/.kube/config does not exist and this is not a pod; ' +
        'give --kubeconfig <path>, or read a hookgate server with --server <admin URL> ' +
        '(the dev server: --server http://127.0.0.1:8081)',
    );
  }
  try {
    if (values.kubeconfig) kc.loadFromFile(values.kubeconfig);
    else kc.loadFromDefault();
    if (values.context) kc.setCurrentContext(values.context);
  } catch (err) {
    throw usageError(`kubeconfig: ${(err as Error).message}`);
  }
  if (!kc.getCurrentCluster()) throw usageError('no cluster in the kubeconfig (or give --server)');
  const api = kc.makeApiClient(CustomObjectsApi);
  const [group, version] = API_VERSION.split('/') as [string, string];
  const plural = kind === 'triggers' ? WEBHOOK_TRIGGER_PLURAL : WORKFLOW_PLURAL;
  let list: {
    items: {
      metadata: { namespace?: string; name: string; creationTimestamp?: string };
      spec: Item['spec'];
      status?: Item['status'];
    }[];
  };
  try {
    list = (await (values.namespace
      ? api.listNamespacedCustomObject({ group, version, namespace: values.namespace, plural })
      : api.listClusterCustomObject({ group, version, plural }))) as typeof list;
  } catch (err) {
    const e = err as { code?: number; body?: string; message?: string; cause?: { code?: string } };
    if (typeof e.code === 'number') {
      let reason = e.message ?? '';
      try {
        reason = (JSON.parse(e.body ?? '') as { message?: string }).message ?? reason;
      } catch {
        // The body was not a Status: keep the message.
      }
      throw new CliError(EXIT.failed, `listing ${plural}: ${reason} (${e.code})`);
    }
    throw new CliError(
      EXIT.unreachable,
      `cannot reach the cluster ${kc.getCurrentCluster()?.server ?? ''}: ${e.cause?.code ?? e.message ?? String(err)}`,
    );
  }
  return list.items
    .map((o) => ({
      namespace: o.metadata.namespace ?? 'default',
      name: o.metadata.name,
      ...(o.metadata.creationTimestamp
        ? { creationTimestamp: String(o.metadata.creationTimestamp) }
        : {}),
      spec: o.spec,
      status: o.status ?? {},
    }))
    .sort((a, b) => `${a.namespace}/${a.name}`.localeCompare(`${b.namespace}/${b.name}`));
}

/** A pod's service account token: client-node's in-cluster configuration. */
const SERVICE_ACCOUNT_TOKEN = '/var/run/secrets/kubernetes.io/serviceaccount/token';

/**
 * Whether loadFromDefault finds a configuration (KUBECONFIG, ~/.kube/config, a pod's
 * service account). Without one it falls back to http://localhost:8080, which on a dev
 * machine is the hookgate webhook port, and fails with a TLS message about that.
 */
function defaultKubeconfigFound(): boolean {
  return (
    (process.env.KUBECONFIG ?? '') !== '' ||
    existsSync(join(homedir(), '.kube', 'config')) ||
    existsSync(SERVICE_ACCOUNT_TOKEN)
  );
}

/** A nested field of a spec as text ('' when absent). */
function text(value: unknown, ...path: string[]): string {
  let v = value;
  for (const key of path)
    v = typeof v === 'object' && v !== null ? (v as Record<string, unknown>)[key] : undefined;
  if (Array.isArray(v)) return v.map((x) => String(x)).join(',');
  return typeof v === 'string' || typeof v === 'number' ? String(v) : '';
}

function ready(item: Item): string {
  return item.status.conditions?.find((c) => c.type === 'Ready')?.status ?? '';
}

/** The Ready condition's message: why a resource is not ready (kubectl's STATUS column). */
function readyMessage(item: Item): string {
  return item.status.conditions?.find((c) => c.type === 'Ready')?.message ?? '';
}

function triggerTable(items: Item[], wide: boolean): string {
  const headers = ['NAMESPACE', 'NAME', 'WORKFLOW', 'METHODS', 'MODE', 'READY', 'URL', 'AGE'];
  if (wide) headers.push('STATUS');
  return table(
    headers,
    items.map((t) => [
      t.namespace,
      t.name,
      text(t.spec, 'workflowRef', 'name'),
      text(t.spec, 'methods'),
      text(t.spec, 'response', 'mode'),
      ready(t),
      t.status.url ?? '',
      age(t.creationTimestamp),
      ...(wide ? [readyMessage(t)] : []),
    ]),
  );
}

function workflowTable(items: Item[], wide: boolean): string {
  const headers = ['NAMESPACE', 'NAME', 'APPLICATION', 'ENVIRONMENT', 'NODES', 'READY', 'AGE'];
  if (wide) headers.push('WORKFLOW ID', 'STATUS');
  return table(
    headers,
    items.map((w) => [
      w.namespace,
      w.name,
      text(w.spec, 'application'),
      text(w.spec, 'environment'),
      String(Array.isArray(w.spec.nodes) ? w.spec.nodes.length : 0),
      ready(w),
      age(w.creationTimestamp),
      ...(wide ? [w.status.workflowId ?? '', readyMessage(w)] : []),
    ]),
  );
}

interface ExecutionRow {
  id: string;
  triggerKey: string;
  workflowId: string;
  status: string;
  createdAt: string;
  startedAt?: string;
  finishedAt?: string;
  attempt?: number;
}

async function executions(
  client: AdminClient,
  values: {
    namespace?: string | undefined;
    status?: string | undefined;
    limit?: string | undefined;
  },
): Promise<ExecutionRow[]> {
  const query = new URLSearchParams();
  if (values.status) query.set('status', values.status);
  if (values.limit) query.set('limit', values.limit);
  const { items } = await client.json<{ items: ExecutionRow[] }>(
    `/api/executions?${query.toString()}`,
  );
  return items.filter((e) => !values.namespace || e.triggerKey.startsWith(`${values.namespace}/`));
}

function duration(e: ExecutionRow): string {
  if (!e.startedAt || !e.finishedAt) return '';
  const ms = Date.parse(e.finishedAt) - Date.parse(e.startedAt);
  return ms < 1000 ? `${ms}ms` : `${(ms / 1000).toFixed(1)}s`;
}

function executionTable(items: ExecutionRow[], wide: boolean): string {
  const headers = ['ID', 'TRIGGER', 'STATUS', 'DURATION', 'AGE'];
  if (wide) headers.push('WORKFLOW', 'ATTEMPT');
  return table(
    headers,
    items.map((e) => [
      e.id,
      e.triggerKey,
      e.status,
      duration(e),
      age(e.createdAt),
      ...(wide ? [e.workflowId, String(e.attempt ?? 1)] : []),
    ]),
  );
}
