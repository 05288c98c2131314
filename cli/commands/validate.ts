// hookgate validate: manifests checked offline with the admission the API server
// applies with our CRDs installed (api/validate.ts: pruning, defaults, the OpenAPI
// schema, list types and the CEL rules), plus what only the set as a whole shows: two
// deployed triggers claiming one URL (api/identity.ts pathShape; offline there is no
// creation order, so both are reported) and one object defined twice; and what the
// operator checks beyond admission (api/workflow-check.ts, api/trigger-check.ts).
import { parseCommand, outputFormat } from '../command.ts';
import { isNamespaceName, pathShape, routePath, workflowIdentifier } from '../../api/identity.ts';
import { admitResource } from '../../api/validate.ts';
import { checkTrigger } from '../../api/trigger-check.ts';
import { checkWorkflow, workflowWarnings } from '../../api/workflow-check.ts';
import {
  API_VERSION,
  type WebhookTriggerSpec,
  type WorkflowSpec,
} from '../../api/v1alpha1/index.ts';
import { EXIT, usageError, type ExitCode } from '../errors.ts';
import {
  manifestFiles,
  parseManifests,
  readManifestText,
  type ManifestDocument,
} from '../manifests.ts';

export const VALIDATE_HELP = `Usage: hookgate validate [options] <file|folder|->...

Checks WebhookTrigger and Workflow manifests offline, with the admission rules the API
server applies (schema, defaults, CEL rules of the CRDs), and across the set: two
deployed triggers on one URL (both are reported: offline nobody is older) and an
object defined twice. Folders are read recursively (*.yaml, *.yml, *.json); - reads
standard input. Other kinds (Secrets, ...) are skipped with a note.

Options:
  -o, --output <text|json|github>  text (default), json, or GitHub Actions annotations
                                   (::error file=...,line=...::message)
  -n, --namespace <ns>             namespace of manifests without one (default: default)
  -q, --quiet                      text: print errors only

Exit codes: 0 all valid, 1 any error (also: no document found at all), 2 bad usage or
an unreadable path.`;

export interface Problem {
  file: string;
  /** 0-based document index in the file. */
  document: number;
  line: number;
  column: number;
  /** `Kind namespace/name` when known. */
  object?: string;
  /** Kubernetes field path, e.g. spec.methods[1]; empty for the document as a whole. */
  field: string;
  message: string;
  reason?: string;
}

export interface ValidatedResource {
  file: string;
  document: number;
  line: number;
  kind: string;
  namespace: string;
  name: string;
  result: 'valid' | 'invalid' | 'skipped';
}

export interface ValidationReport {
  files: number;
  resources: ValidatedResource[];
  errors: Problem[];
  notes: Problem[];
  /** The admitted (defaulted) objects, by `Kind namespace/name`; first definition wins. */
  admitted: Map<string, Record<string, unknown>>;
}

interface Admitted {
  doc: ManifestDocument;
  kind: string;
  namespace: string;
  name: string;
  object: Record<string, unknown>;
}

const NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
const HOOKGATE_GROUP = API_VERSION.split('/')[0] as string;

/** Validate the manifests of `files` (already listed); the report, nothing printed. */
export function validateFiles(files: string[], defaultNamespace = 'default'): ValidationReport {
  const report: ValidationReport = {
    files: files.length,
    resources: [],
    errors: [],
    notes: [],
    admitted: new Map(),
  };
  const admitted: Admitted[] = [];
  for (const file of files) {
    const display = file === '-' ? '<stdin>' : file;
    for (const doc of parseManifests(display, readManifestText(file))) {
      const one = validateDocument(doc, defaultNamespace, report);
      if (one) admitted.push(one);
    }
  }
  setProblems(admitted, report);
  return report;
}

function problemAt(
  doc: ManifestDocument,
  field: string,
  message: string,
  extra: Partial<Problem> = {},
): Problem {
  const { line, column } = field ? doc.lineOf(field) : { line: doc.line, column: 1 };
  return { file: doc.file, document: doc.index, line, column, field, message, ...extra };
}

/** kind, apiVersion, name and namespace of a document, '' where absent. */
function identity(value: unknown, defaultNamespace: string) {
  const obj = (typeof value === 'object' && value !== null ? value : {}) as Record<string, unknown>;
  const meta = (
    typeof obj.metadata === 'object' && obj.metadata !== null ? obj.metadata : {}
  ) as Record<string, unknown>;
  return {
    kind: typeof obj.kind === 'string' ? obj.kind : '',
    apiVersion: typeof obj.apiVersion === 'string' ? obj.apiVersion : '',
    name: typeof meta.name === 'string' ? meta.name : '',
    namespace: typeof meta.namespace === 'string' ? meta.namespace : defaultNamespace,
  };
}

function validateDocument(
  doc: ManifestDocument,
  defaultNamespace: string,
  report: ValidationReport,
): Admitted | undefined {
  if (doc.syntaxError) {
    const { message, line, column } = doc.syntaxError;
    report.errors.push({
      file: doc.file,
      document: doc.index,
      line,
      column,
      field: '',
      message: `YAML syntax error: ${message}`,
    });
    return undefined;
  }
  const { kind, apiVersion, name, namespace } = identity(doc.value, defaultNamespace);
  const object = `${kind || '(no kind)'} ${namespace}/${name || '(no name)'}`;
  const resource = { file: doc.file, document: doc.index, line: doc.line, kind, namespace, name };
  const group = apiVersion.split('/')[0] ?? '';
  if (group !== HOOKGATE_GROUP && meantAsHookgate(kind, group)) {
    report.resources.push({ ...resource, result: 'invalid' });
    report.errors.push(
      problemAt(
        doc,
        'apiVersion',
        `${apiVersion ? `Unsupported value: "${apiVersion}"` : 'Required value'}: must be ${API_VERSION}`,
        { object, reason: apiVersion ? 'FieldValueNotSupported' : 'FieldValueRequired' },
      ),
    );
    return undefined;
  }
  if (group !== HOOKGATE_GROUP) {
    report.resources.push({ ...resource, result: 'skipped' });
    report.notes.push(
      problemAt(
        doc,
        '',
        `${apiVersion || '(no apiVersion)'} ${kind || '(no kind)'} ${name} is not a hookgate resource: skipped`
          .replace(/\s+/g, ' ')
          .replace(' :', ':'),
        {
          object,
        },
      ),
    );
    return undefined;
  }
  const errors: Problem[] = [];
  if (!name || !NAME.test(name) || name.length > 253)
    errors.push(
      problemAt(
        doc,
        'metadata.name',
        'Required value: a DNS subdomain name (lower case letters, digits, - and .)',
        {
          object,
          reason: 'FieldValueRequired',
        },
      ),
    );
  // As `hookgate dev` and the API server: a namespace is a DNS label (also one given by -n).
  if (!isNamespaceName(namespace))
    errors.push(
      problemAt(
        doc,
        'metadata.namespace',
        `Invalid value: "${namespace}": a DNS label (lower case letters, digits and -, at most 63)`,
        { object, reason: 'FieldValueInvalid' },
      ),
    );
  const result = admitResource(doc.value);
  if (!result.ok)
    errors.push(
      ...result.errors.map((e) => problemAt(doc, e.field, e.message, { object, reason: e.reason })),
    );
  else
    errors.push(
      ...specProblems(kind, result.object).map(([field, message]) =>
        problemAt(doc, field, message, { object, reason: 'FieldValueInvalid' }),
      ),
    );
  report.resources.push({ ...resource, result: errors.length > 0 ? 'invalid' : 'valid' });
  report.errors.push(...errors);
  if (errors.length > 0 || !result.ok) return undefined;
  report.notes.push(...specNotes(doc, kind, object, result.object));

  return { doc, kind, namespace, name, object: result.object };
}

/**
 * A hookgate kind with no apiVersion, or with a group that names hookgate but is not
 * hookgate.dev (a typo): an error, not "another kind, skipped", which passed it
 * unchecked with exit 0 while the API server refuses it. A Workflow of another group
 * (Argo's argoproj.io) is still someone else's and skipped.
 */
function meantAsHookgate(kind: string, group: string): boolean {
  if (kind !== 'WebhookTrigger' && kind !== 'Workflow') return false;
  return group === '' || group.toLowerCase().includes('hookgate');
}

/**
 * What the operator reports as Valid=False beyond admission, for one admitted object:
 * a Workflow's node references, JSONata, outbound entries and never-reachable URLs; a
 * WebhookTrigger's never-reachable provider URLs. As [field, message] pairs.
 */
function specProblems(kind: string, object: Record<string, unknown>): [string, string][] {
  const spec = object.spec;
  const problems =
    kind === 'Workflow'
      ? checkWorkflow(spec as WorkflowSpec)
      : kind === 'WebhookTrigger'
        ? checkTrigger(spec as WebhookTriggerSpec)
        : [];
  return fieldMessages(problems);
}

/**
 * What the operator's Valid=True message also says, for one admitted object: a
 * Workflow's respond-node headers the gateway will leave out (sent, but not all of it).
 */
function specNotes(
  doc: ManifestDocument,
  kind: string,
  object: string,
  admitted: Record<string, unknown>,
): Problem[] {
  if (kind !== 'Workflow') return [];
  return fieldMessages(workflowWarnings(admitted.spec as WorkflowSpec)).map(([field, message]) =>
    problemAt(doc, field, message, { object }),
  );
}

/** "<field path>: <message>" lines as [field, message] pairs. */
function fieldMessages(lines: string[]): [string, string][] {
  return lines.map((p) => {
    const at = p.indexOf(': ');
    return [p.slice(0, at), p.slice(at + 2)];
  });
}

/** Problems of the set: objects defined twice, and URL conflicts between triggers. */
function setProblems(admitted: Admitted[], report: ValidationReport): void {
  const invalid = (doc: ManifestDocument) => {
    const r = report.resources.find((x) => x.file === doc.file && x.document === doc.index);
    if (r) r.result = 'invalid';
  };
  const seen = new Map<string, Admitted>();
  for (const a of admitted) {
    const key = `${a.kind} ${a.namespace}/${a.name}`;
    const first = seen.get(key);
    if (first) {
      report.errors.push(
        problemAt(a.doc, 'metadata.name', `${key} is already defined in ${where(first.doc)}`, {
          object: key,
          reason: 'FieldValueDuplicate',
        }),
      );
      invalid(a.doc);
    } else {
      seen.set(key, a);
      report.admitted.set(key, a.object);
    }
  }
  const claims = new Map<string, { a: Admitted; url: string }[]>();
  for (const a of seen.values()) {
    if (a.kind !== 'WebhookTrigger') continue;
    const spec = a.object.spec as {
      workflowRef: { name: string };
      pathSegment: string;
      deploy: boolean;
    };
    if (!spec.deploy) continue;
    const wf = seen.get(`Workflow ${a.namespace}/${spec.workflowRef.name}`);
    if (!wf) {
      report.notes.push(
        problemAt(
          a.doc,
          'spec.workflowRef.name',
          `Workflow ${a.namespace}/${spec.workflowRef.name} is not in the files given: the URL is not checked for conflicts`,
          {
            object: `WebhookTrigger ${a.namespace}/${a.name}`,
          },
        ),
      );
      continue;
    }
    const environment = (wf.object.spec as { environment: string }).environment;
    const url = routePath(workflowIdentifier(a.namespace, environment, wf.name), spec.pathSegment);
    const shape = pathShape(url);
    claims.set(shape, [...(claims.get(shape) ?? []), { a, url }]);
  }
  for (const rivals of claims.values()) {
    if (rivals.length < 2) continue;
    for (const { a, url } of rivals) {
      const others = rivals
        .filter((r) => r.a !== a)
        .map((r) => `WebhookTrigger ${r.a.namespace}/${r.a.name} (${where(r.a.doc)})`);
      report.errors.push(
        problemAt(
          a.doc,
          'spec.pathSegment',
          `PathConflict: ${url} is also claimed by ${others.join(', ')}; in a cluster the oldest keeps it and the others are not deployed`,
          {
            object: `WebhookTrigger ${a.namespace}/${a.name}`,
            reason: 'PathConflict',
          },
        ),
      );
    }
  }
}

function where(doc: ManifestDocument): string {
  return `${doc.file}:${doc.line}`;
}

// ---- output -------------------------------------------------------------------------

function label(p: Problem): string {
  return `${p.file}:${p.line}:${p.column}`;
}

export function formatText(report: ValidationReport, quiet: boolean): string {
  const lines: string[] = [];
  for (const e of report.errors)
    lines.push(
      `${label(e)}: error: ${e.object ? `${e.object}: ` : ''}${e.field ? `${e.field}: ` : ''}${e.message} (document ${e.document + 1})`,
    );
  if (!quiet) {
    for (const n of report.notes) lines.push(`${label(n)}: note: ${n.message}`);
    const count = (r: ValidatedResource['result']) =>
      report.resources.filter((x) => x.result === r).length;
    lines.push(
      `${report.files} file(s), ${count('valid')} valid, ${count('invalid')} invalid, ` +
        `${count('skipped')} skipped, ${report.errors.length} error(s)`,
    );
  }
  return lines.join('\n');
}

/** GitHub Actions workflow commands: data escapes %, CR, LF; properties also : and ,. */
function escapeData(s: string): string {
  return s.replace(/%/g, '%25').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
}
function escapeProperty(s: string): string {
  return escapeData(s).replace(/:/g, '%3A').replace(/,/g, '%2C');
}

export function formatGithub(report: ValidationReport): string {
  const line = (kind: 'error' | 'notice', p: Problem) => {
    const title = p.object ? `${p.object}${p.field ? ` ${p.field}` : ''}` : 'hookgate validate';
    return `::${kind} file=${escapeProperty(p.file)},line=${p.line},col=${p.column},title=${escapeProperty(title)}::${escapeData(`${p.field ? `${p.field}: ` : ''}${p.message}`)}`;
  };
  return [
    ...report.errors.map((e) => line('error', e)),
    ...report.notes.map((n) => line('notice', n)),
  ].join('\n');
}

export function formatJson(report: ValidationReport): string {
  const { admitted: _admitted, ...rest } = report;
  return JSON.stringify({ valid: report.errors.length === 0, ...rest }, null, 2);
}

export function validateCommand(argv: string[]): ExitCode {
  const parsed = parseCommand(argv, VALIDATE_HELP, {
    output: { type: 'string', short: 'o', default: 'text' },
    namespace: { type: 'string', short: 'n', default: 'default' },
    quiet: { type: 'boolean', short: 'q', default: false },
  });
  if (!parsed) return EXIT.ok;
  const { values, positionals } = parsed;
  outputFormat(values.output, ['text', 'json', 'github']);
  if (positionals.length === 0)
    throw usageError('name at least one file or folder (or - for standard input)');
  const report = validateFiles(manifestFiles(positionals), values.namespace);
  // Nothing read at all is a failure, as kubectl apply's "no objects passed to apply":
  // `kustomize build ... | hookgate validate -` whose producer failed, or a folder with no
  // manifests, passed with exit 0.
  if (report.resources.length === 0 && report.errors.length === 0)
    report.errors.push({
      file: positionals.map((p) => (p === '-' ? '<stdin>' : p)).join(' '),
      document: 0,
      line: 1,
      column: 1,
      field: '',
      message: `no manifests: ${report.files === 0 ? 'no *.yaml, *.yml or *.json file' : 'every file is empty'}`,
      reason: 'NoManifests',
    });
  const out =
    values.output === 'json'
      ? formatJson(report)
      : values.output === 'github'
        ? formatGithub(report)
        : formatText(report, values.quiet);
  if (out) console.log(out);
  return report.errors.length > 0 ? EXIT.failed : EXIT.ok;
}
