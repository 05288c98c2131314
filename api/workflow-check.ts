// Checks on a Workflow that its CRD schema cannot express: every node reference
// points at a node, every JSONata expression compiles (its regular expressions on the
// linear-time engine the runtime uses, linear-regex.ts), every outbound policy entry parses,
// no http node targets a destination no outbound policy could open (cloud metadata)
// or sets a request header that is not its to set (http-node-headers.ts).
import jsonata from 'jsonata';
import { refusedRequestHeader } from './http-node-headers.ts';
import { nonLinearRegex } from './linear-regex.ts';
import type { WorkflowNode, WorkflowSpec } from './v1alpha1/index.ts';
import { responseHeaderRefusal } from './v1alpha1/index.ts';
import { parseOutboundEntry } from './v1alpha1/outbound-entries.ts';
import { neverReachable } from './v1alpha1/outbound-never.ts';

/** Problems found, each as "<field path>: <message>". Empty when the workflow is runnable. */
export function checkWorkflow(spec: WorkflowSpec): string[] {
  const problems: string[] = [];
  const ids = new Set(spec.nodes.map((n) => n.id));
  spec.nodes.forEach((node, i) => {
    const at = `spec.nodes[${i}]`;
    for (const [field, target] of nodeReferences(node)) {
      if (!ids.has(target)) problems.push(`${at}.${field}: unknown node "${target}"`);
    }
    for (const [field, expression] of nodeExpressions(node)) {
      const error = compileError(expression);
      if (error) problems.push(`${at}.${field}: invalid JSONata expression: ${error}`);
    }
    // A target no outbound policy could open: every run that reaches this node fails at
    // it (or passes its error on), so the author hears of it now (docs/workflows.md).
    const never = node.request ? neverReachable(node.request.url) : undefined;
    if (never) problems.push(`${at}.request.url: ${never}`);
    for (const name of Object.keys(node.request?.headers ?? {})) {
      const refused = refusedRequestHeader(name);
      if (refused) problems.push(`${at}.request.headers.${name}: ${refused}`);
    }
  });
  if (spec.output) {
    const error = compileError(spec.output);
    if (error) problems.push(`spec.output: invalid JSONata expression: ${error}`);
  }
  for (const list of ['allow', 'deny'] as const) {
    spec.outbound?.[list]?.forEach((entry, i) => {
      try {
        parseOutboundEntry(entry);
      } catch (error) {
        problems.push(`spec.outbound.${list}[${i}]: ${(error as Error).message}`);
      }
    });
  }
  return problems;
}

/**
 * What the gateway will leave out of a runnable workflow's answers, each as "<field
 * path>: <message>": a respond node's headers that the rule for authors' response
 * headers refuses (responseHeaderRefusal). Not problems: the answer is sent without them, as it was before they were checked here (a workflow that ran would stop being
 * published), but the author hears of it when applying and validating, not from a
 * caller who misses the header. Admission cannot check them by name: a map's keys in CEL
 * cost what the whole map may hold.
 */
export function workflowWarnings(spec: WorkflowSpec): string[] {
  const warnings: string[] = [];
  spec.nodes.forEach((node, i) => {
    if (node.type !== 'respond' || !node.headers) return;
    for (const [name, value] of Object.entries(node.headers)) {
      const refused = responseHeaderRefusal(name, value);
      if (refused) {
        warnings.push(`spec.nodes[${i}].headers[${name}]: left out of the answer: ${refused}`);
      }
    }
  });
  return warnings;
}

/** Whether some node answers the webhook caller (needed by the waitForResponseNode mode). */
export function hasRespondNode(spec: WorkflowSpec): boolean {
  return spec.nodes.some((n) => n.type === 'respond');
}

function nodeReferences(node: WorkflowNode): [string, string][] {
  const refs: [string, string][] = [];
  if (node.next) refs.push(['next', node.next]);
  if (node.then) refs.push(['then', node.then]);
  if (node.else) refs.push(['else', node.else]);
  if (node.default) refs.push(['default', node.default]);
  node.cases?.forEach((c, j) => refs.push([`cases[${j}].next`, c.next]));
  return refs;
}

function nodeExpressions(node: WorkflowNode): [string, string][] {
  const out: [string, string][] = [];
  if (node.expression) out.push(['expression', node.expression]);
  if (node.condition) out.push(['condition', node.condition]);
  if (node.request?.body) out.push(['request.body', node.request.body]);
  node.cases?.forEach((c, j) => out.push([`cases[${j}].condition`, c.condition]));
  return out;
}

function compileError(expression: string): string | undefined {
  try {
    return nonLinearRegex(jsonata(expression).ast());
  } catch (err) {
    const e = err as { message?: string; position?: number };
    return `${e.message ?? 'syntax error'}${e.position !== undefined ? ` at position ${e.position}` : ''}`;
  }
}
