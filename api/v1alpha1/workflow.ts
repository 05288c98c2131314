// Workflow: what runs when a WebhookTrigger accepts a request.
import { Type, type Static } from '@sinclair/typebox';
import {
  Conditions,
  SHORT_DURATION_PATTERN,
  literals,
  withRules,
  type Resource,
} from './common.ts';
import { MAX_ITEMS, MAX_LENGTH } from './bounds.ts';

export const WORKFLOW_KIND = 'Workflow';
export const WORKFLOW_PLURAL = 'workflows';

export const ENVIRONMENTS = ['development', 'staging', 'production'] as const;
export type Environment = (typeof ENVIRONMENTS)[number];

export const NODE_TYPES = [
  'transform',
  'http',
  'delay',
  'if',
  'switch',
  'respond',
  'fail',
] as const;
export type NodeType = (typeof NODE_TYPES)[number];

const NODE_ID_PATTERN = '^[a-zA-Z][a-zA-Z0-9_-]{0,62}$';
const NodeId = (description: string) =>
  Type.String({ pattern: NODE_ID_PATTERN, maxLength: MAX_LENGTH.label, description });

const Expression = (description: string) =>
  Type.String({
    minLength: 1,
    maxLength: MAX_LENGTH.expression,
    description: `${description} (a JSONata expression).`,
  });

export const ErrorPolicy = Type.Object(
  {
    action: literals(['stop', 'continue', 'retry'] as const, {
      default: 'stop',
      description:
        'What a failure of this node does: stop fails the execution, continue passes the error on as the node output ({"error": {...}}), retry runs the node again.',
    }),
    maxRetries: Type.Integer({
      minimum: 1,
      maximum: 10,
      default: 3,
      description:
        'With action retry: how many times the node is run again before the execution fails.',
    }),
    backoff: Type.String({
      maxLength: MAX_LENGTH.duration,
      pattern: SHORT_DURATION_PATTERN,
      default: '200ms',
      description:
        'With action retry: the first wait between attempts; it doubles each time (with jitter).',
    }),
  },
  { additionalProperties: false, description: 'Error handling for one node.' },
);

export const HttpRequestSpec = Type.Object(
  {
    method: literals(['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const, {
      default: 'POST',
      description: 'HTTP method of the outbound request.',
    }),
    url: Type.String({
      minLength: 1,
      maxLength: MAX_LENGTH.url,
      pattern: '^https?://',
      description:
        'Target URL. Outbound requests are refused for loopback, private, link-local and metadata addresses unless the cluster outbound policy allows them (spec.outbound narrows it).',
    }),
    headers: Type.Optional(
      Type.Record(
        Type.String(),
        Type.String({ maxLength: MAX_LENGTH.headerValue, description: 'Header value.' }),
        { maxProperties: MAX_ITEMS.headers, description: 'Request headers (literal values).' },
      ),
    ),
    body: Type.Optional(
      Expression('Request body, evaluated against the node input; default: the node input'),
    ),
    timeout: Type.String({
      maxLength: MAX_LENGTH.duration,
      pattern: SHORT_DURATION_PATTERN,
      default: '10s',
      description: 'Time allowed for one attempt.',
    }),
    retries: Type.Integer({
      minimum: 0,
      maximum: 10,
      default: 0,
      description:
        'Attempts after the first one on network errors, 429 and 5xx, with exponential backoff.',
    }),
  },
  { additionalProperties: false, description: 'The outbound request of an http node.' },
);

export const SwitchCase = Type.Object(
  {
    condition: Expression('Condition; the first case whose condition is truthy is taken'),
    next: NodeId('Node to continue with when this case is taken.'),
  },
  { additionalProperties: false, description: 'One branch of a switch node.' },
);

export const WorkflowNode = withRules(
  Type.Object(
    {
      id: NodeId(
        'Identifier of the node, unique in the workflow; later nodes read its output as $nodes.<id>.',
      ),
      type: literals(NODE_TYPES, {
        description:
          'transform: evaluate expression; http: call a URL; delay: wait; if/switch: branch; respond: answer the webhook caller (ResponseToWebhook); fail: end the execution with an error.',
      }),
      description: Type.Optional(
        Type.String({ maxLength: MAX_LENGTH.description, description: 'What this node is for.' }),
      ),
      next: Type.Optional(
        NodeId(
          'Node to run after this one; default: the next node in the list (the end after the last).',
        ),
      ),
      expression: Type.Optional(
        Expression(
          'transform: the node output. fail: the error message. respond: the response body',
        ),
      ),
      condition: Type.Optional(Expression('if: the condition')),
      then: Type.Optional(
        NodeId('if: node to run when the condition is truthy; default: the next node.'),
      ),
      else: Type.Optional(
        NodeId('if: node to run when the condition is falsy; default: the next node.'),
      ),
      cases: Type.Optional(
        Type.Array(SwitchCase, {
          minItems: 1,
          maxItems: 64,
          description: 'switch: the branches, in order.',
        }),
      ),
      default: Type.Optional(
        NodeId('switch: node to run when no case matches; default: the next node.'),
      ),
      duration: Type.Optional(
        Type.String({
          maxLength: MAX_LENGTH.duration,
          pattern: SHORT_DURATION_PATTERN,
          description: 'delay: how long to wait, e.g. 500ms, 2s.',
        }),
      ),
      request: Type.Optional(HttpRequestSpec),
      statusCode: Type.Optional(
        Type.Integer({
          minimum: 100,
          maximum: 599,
          description:
            'respond: status code sent to the caller, 200 to 599 (default 200). fail: status reported (default 500).',
        }),
      ),
      headers: Type.Optional(
        Type.Record(
          Type.String(),
          Type.String({ maxLength: MAX_LENGTH.headerValue, description: 'Header value.' }),
          {
            maxProperties: MAX_ITEMS.headers,
            description: 'respond: extra response headers (literal values).',
          },
        ),
      ),
      onError: Type.Optional(ErrorPolicy),
    },
    { additionalProperties: false, description: 'One step of the workflow.' },
  ),
  [
    {
      rule: "self.type != 'transform' || has(self.expression)",
      message: 'a transform node needs an expression',
      fieldPath: '.expression',
      reason: 'FieldValueRequired',
    },
    {
      rule: "self.type != 'http' || has(self.request)",
      message: 'an http node needs a request',
      fieldPath: '.request',
      reason: 'FieldValueRequired',
    },
    {
      rule: "self.type != 'delay' || has(self.duration)",
      message: 'a delay node needs a duration',
      fieldPath: '.duration',
      reason: 'FieldValueRequired',
    },
    {
      rule: "self.type != 'if' || has(self.condition)",
      message: 'an if node needs a condition',
      fieldPath: '.condition',
      reason: 'FieldValueRequired',
    },
    {
      rule: "self.type != 'switch' || has(self.cases)",
      message: 'a switch node needs cases',
      fieldPath: '.cases',
      reason: 'FieldValueRequired',
    },
    {
      // 1xx is an interim answer, never the one a caller waits for (a 101 would tell a
      // proxy in front of the gateway to turn the connection into a tunnel).
      rule: "self.type != 'respond' || !has(self.statusCode) || self.statusCode >= 200",
      message: 'a respond node answers with a final status: 200 to 599',
      fieldPath: '.statusCode',
      reason: 'FieldValueInvalid',
    },
  ],
);
export type WorkflowNode = Static<typeof WorkflowNode>;

/**
 * The failure classes an execution-level retry can be asked for. Validation failures
 * (the output schema), workflow faults (step limit, a missing node, a delay over the
 * limit), refused outbound addresses, shutdown and a trigger gone are never retried.
 */
export const RETRYABLE_FAILURES = [
  'timeout',
  'network',
  'http5xx',
  'http429',
  'http4xx',
  'nodeError',
  'fail',
] as const;
export type RetryableFailure = (typeof RETRYABLE_FAILURES)[number];
export const DEFAULT_RETRY_ON: readonly RetryableFailure[] = [
  'timeout',
  'network',
  'http5xx',
  'http429',
];

/** A wait of a retry policy: `250ms`, `30s`, `5m`, `2h`. */
const RETRY_DURATION_PATTERN = '^[0-9]{1,6}(ms|s|m|h)$';
const RetryDuration = (description: string, fallback: string) =>
  Type.String({
    maxLength: MAX_LENGTH.duration,
    pattern: RETRY_DURATION_PATTERN,
    default: fallback,
    description,
  });

export const RetryPolicy = Type.Object(
  {
    attempts: Type.Integer({
      minimum: 1,
      maximum: 20,
      default: 3,
      description:
        'Runs of the whole workflow at most, the first included (1: no retry). When the last one fails with a retryable failure the execution goes to the dead-letter list.',
    }),
    backoff: Type.Optional(
      Type.Object(
        {
          initial: RetryDuration('Wait before the second attempt.', '1s'),
          max: RetryDuration('Longest wait between two attempts.', '5m'),
          multiplier: Type.Number({
            minimum: 1,
            maximum: 10,
            default: 2,
            description: 'Each wait is the previous one times this (capped at max).',
          }),
          jitter: Type.Number({
            minimum: 0,
            maximum: 1,
            default: 0.2,
            description:
              'Share of each wait drawn at random: the wait is between (1 - jitter) × and 1 × the computed one.',
          }),
        },
        { additionalProperties: false, description: 'Waits between attempts.' },
      ),
    ),
    on: Type.Optional(
      Type.Array(
        literals(RETRYABLE_FAILURES, {
          description:
            'timeout: an http node timed out; network: an http node could not connect or lost the connection; http5xx / http429 / http4xx: an http node got that status (after its own retries); nodeError: any other node error (e.g. an expression failed); fail: a fail node ran.',
        }),
        {
          maxItems: RETRYABLE_FAILURES.length,
          'x-kubernetes-list-type': 'set',
          description: 'Failures that retry; default timeout, network, http5xx, http429.',
        },
      ),
    ),
  },
  {
    additionalProperties: false,
    description:
      'Execution-level retries: a failed execution runs the workflow again from its first node, under the same execution id. See docs/retries-and-replay.md.',
  },
);
export type RetryPolicy = Static<typeof RetryPolicy>;

const OutboundEntry = Type.String({
  minLength: 1,
  maxLength: MAX_LENGTH.outboundEntry,
  pattern: '^[0-9A-Za-z*._:/\\[\\]-]+$',
  description:
    'A CIDR or IP (10.20.0.0/16, fd00::/8), a host name (api.example.com), a wildcard suffix (*.payments.svc.cluster.local) or host:port.',
});

export const OutboundPolicy = Type.Object(
  {
    allow: Type.Optional(
      Type.Array(OutboundEntry, {
        maxItems: MAX_ITEMS.outboundEntries,
        description:
          "When set, the workflow's http nodes and callbacks reach only destinations matching an entry, and only where the cluster outbound policy allows them too: it narrows, never widens.",
      }),
    ),
    deny: Type.Optional(
      Type.Array(OutboundEntry, {
        maxItems: MAX_ITEMS.outboundEntries,
        description:
          'Destinations refused to this workflow even though the cluster outbound policy allows them.',
      }),
    ),
  },
  {
    additionalProperties: false,
    description:
      'Narrows the cluster\'s outbound policy for this workflow\'s http nodes and callbacks (docs/workflows.md, "Outbound policy").',
  },
);
export type OutboundPolicy = Static<typeof OutboundPolicy>;

/** What becomes of an execution's record once it has succeeded (ADR 0041). */
export const EXECUTION_RECORD_POLICIES = ['Keep', 'Discard'] as const;
export type ExecutionRecordPolicy = (typeof EXECUTION_RECORD_POLICIES)[number];

export const ExecutionRecords = Type.Object(
  {
    succeeded: literals(EXECUTION_RECORD_POLICIES, {
      default: 'Keep',
      description:
        "Keep: a succeeded execution keeps its record (input, output, per-run log) and events for the store's lifetime. Discard: they are removed when it succeeds (its links and the admin API answer 404 from then on); a caller waiting for it still gets its result. Failed and dead-lettered executions are always kept.",
    }),
  },
  {
    additionalProperties: false,
    description:
      'Which finished executions of this workflow are stored (docs/workflows.md, "Discarding the records of succeeded executions").',
  },
);
export type ExecutionRecords = Static<typeof ExecutionRecords>;

export const WorkflowSpec = Type.Object(
  {
    publish: Type.Boolean({
      default: true,
      description:
        'The Publish action: when true the workflow is registered with the engine and can run. When false, requests to its triggers get the workflow-not-found error.',
    }),
    application: Type.String({
      minLength: 1,
      maxLength: MAX_LENGTH.label,
      pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$',
      description: 'Application (service) this workflow belongs to; used to group analytics.',
    }),
    environment: literals(ENVIRONMENTS, {
      default: 'development',
      description:
        'Environment of this workflow: development, staging or production. Part of the workflow identifier.',
    }),
    description: Type.Optional(
      Type.String({ maxLength: MAX_LENGTH.description, description: 'What the workflow does.' }),
    ),
    nodes: Type.Array(WorkflowNode, {
      minItems: 1,
      maxItems: 256,
      description:
        'The steps, run from the first one; each goes on to `next` or to the following node. Node ids are unique.',
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['id'],
    }),
    output: Type.Optional(
      Expression(
        'Final output of the execution, evaluated with $trigger and $nodes bound; default: the output of the last node run',
      ),
    ),
    retry: Type.Optional(RetryPolicy),
    outbound: Type.Optional(OutboundPolicy),
    executionRecords: Type.Optional(ExecutionRecords),
  },
  { additionalProperties: false, description: 'Desired state of the Workflow.' },
);
export type WorkflowSpec = Static<typeof WorkflowSpec>;

export const WorkflowStatus = Type.Object(
  {
    observedGeneration: Type.Optional(
      Type.Integer({
        minimum: 0,
        description: 'The metadata.generation the status was computed from.',
      }),
    ),
    workflowId: Type.Optional(
      Type.String({
        maxLength: MAX_LENGTH.workflowId,
        description:
          'Workflow identifier: <namespace>_<environment>_<name> (`_` occurs in none of them, so no two workflows share one).',
      }),
    ),
    conditions: Type.Optional(Conditions),
  },
  { additionalProperties: false, description: 'Observed state of the Workflow.' },
);
export type WorkflowStatus = Static<typeof WorkflowStatus>;

export type Workflow = Resource<WorkflowSpec, WorkflowStatus>;
