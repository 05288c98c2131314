// hookgate openapi <trigger>: the OpenAPI 3.1 document of a trigger (or, with --all,
// of the whole gateway) from a server's admin API, or offline from manifest files
// (--file), built by the same code the server uses (runtime/openapi/document.ts).
import { parseServerCommand, outputFormat, positionalsUpTo } from '../command.ts';
import { stringify } from 'yaml';
import { baseUrlProblem, routePath, workflowIdentifier } from '../../api/identity.ts';
import type { WebhookTriggerSpec } from '../../api/v1alpha1/index.ts';
import {
  gatewayDocument,
  triggerDocument,
  type OpenApiRoute,
} from '../../runtime/openapi/document.ts';
import { AdminClient, parseTriggerRef, SERVER_HELP } from '../admin-client.ts';
import { CliError, EXIT, usageError, type ExitCode } from '../errors.ts';
import { manifestFiles } from '../manifests.ts';
import { formatText, validateFiles } from './validate.ts';

export const OPENAPI_HELP = `Usage: hookgate openapi <namespace>/<name> [options]
       hookgate openapi --all [options]

Prints the OpenAPI 3.1 document of a deployed trigger, or of every endpoint of the
gateway you may read (--all), from a server's admin API; or offline from manifests
(--file), which must hold the trigger's Workflow too. docs/openapi.md.

Options:
  -n, --namespace <ns>      namespace when the trigger is given by name (default: default)
      --all                 the gateway's document
  -o, --output <json|yaml>  json (default) or yaml
  -f, --file <path>         offline: manifest files or folders (repeatable)
      --base-url <url>      offline: the public base URL (default http://localhost:8080)
${SERVER_HELP}

Exit codes: 0 printed, 1 not found, refused or invalid manifests, 2 bad usage,
3 server unreachable.`;

export async function openapiCommand(argv: string[]): Promise<ExitCode> {
  const parsed = parseServerCommand(argv, OPENAPI_HELP, {
    namespace: { type: 'string', short: 'n' },
    all: { type: 'boolean', default: false },
    output: { type: 'string', short: 'o', default: 'json' },
    file: { type: 'string', short: 'f', multiple: true },
    'base-url': { type: 'string', default: 'http://localhost:8080' },
  });
  if (!parsed) return EXIT.ok;
  const { values } = parsed;
  const positionals = values.all
    ? positionalsUpTo(parsed.positionals, 0, 'openapi --all takes no trigger')
    : positionalsUpTo(parsed.positionals, 1, 'openapi takes one trigger: <namespace>/<name>');
  outputFormat(values.output, ['json', 'yaml']);
  const ref = values.all ? undefined : parseTriggerRef(positionals[0], values.namespace);
  let doc: unknown;
  if (values.file) {
    const problem = baseUrlProblem(values['base-url']);
    if (problem) throw usageError(`--base-url: ${problem}`);
    doc = offline(values.file, ref, values['base-url']);
  } else {
    const client = new AdminClient(values);
    doc = await client.json(
      ref
        ? `/api/triggers/${encodeURIComponent(ref.namespace)}/${encodeURIComponent(ref.name)}/openapi.json`
        : '/api/openapi.json',
    );
  }
  process.stdout.write(
    values.output === 'yaml' ? stringify(doc) : `${JSON.stringify(doc, null, 2)}\n`,
  );
  return EXIT.ok;
}

function offline(
  paths: string[],
  ref: { namespace: string; name: string } | undefined,
  baseUrl: string,
): unknown {
  const report = validateFiles(manifestFiles(paths));
  if (report.errors.length > 0)
    throw new CliError(EXIT.failed, `the manifests are not valid:\n${formatText(report, true)}`);
  const routes: OpenApiRoute[] = [];
  for (const [key, object] of report.admitted) {
    if (!key.startsWith('WebhookTrigger ')) continue;
    const [namespace = 'default', name = ''] = key.slice('WebhookTrigger '.length).split('/');
    const spec = object.spec as WebhookTriggerSpec;
    if (!spec.deploy) continue;
    const wf = report.admitted.get(`Workflow ${namespace}/${spec.workflowRef.name}`);
    if (!wf) continue;
    const environment = (wf.spec as { environment: string }).environment;
    const workflowId = workflowIdentifier(namespace, environment, spec.workflowRef.name);
    routes.push({
      namespace,
      name,
      workflowId,
      generation: 1,
      path: routePath(workflowId, spec.pathSegment),
      spec,
    });
  }
  if (!ref) return gatewayDocument(routes, baseUrl);
  const route = routes.find((r) => r.namespace === ref.namespace && r.name === ref.name);
  if (!route)
    throw new CliError(
      EXIT.failed,
      `WebhookTrigger ${ref.namespace}/${ref.name} is not in the files with its Workflow (or is not deployed)`,
    );
  return triggerDocument(route, baseUrl);
}
