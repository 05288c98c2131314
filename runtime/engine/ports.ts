// The execution engine port: what the gateway asks of the engine, whichever adapter
// (in-process, or a Redis queue with workers) runs the workflow.
import type { ErrorCode } from '../errors.ts';
import type { WorkflowRegistration } from '../../api/records/records.ts';
import type { RetryableFailure } from '../../api/v1alpha1/workflow.ts';
import type { TraceCarrier } from '../tracing/tracing.ts';

/**
 * What kind of failure ended an attempt (retry-policy.ts classifies them). The
 * retryable classes are those a Workflow's `retry.on` can name; the others never retry:
 * validation (output schema), workflow (step limit, a missing node, a delay over the
 * limit, unknown node type), refused (outbound address refused), shutdown, unrunnable
 * (the trigger or workflow went away, or the trigger was re-created, before a queued
 * attempt ran), internal.
 */
export type FailureKind =
  RetryableFailure | 'validation' | 'workflow' | 'refused' | 'shutdown' | 'unrunnable' | 'internal';

/**
 * The trigger node's output record: what every downstream node sees of the request
 * (documented in docs/workflows.md). Header names are lower case.
 */
export interface TriggerOutput {
  body: unknown;
  headers: Record<string, string>;
  query: Record<string, string | string[]>;
  params: Record<string, string>;
  metadata: {
    timestamp: string;
    correlationId: string;
    requestId: string;
    executionId: string;
    method: string;
    path: string;
    /** Route template, e.g. /webhook/shop_production_orders/ingest/:id */
    route: string;
    contentType?: string;
    consumer?: string;
    /** The caller's W3C traceparent, when the gateway accepted it (outbound/trace-context.ts). */
    traceparent?: string;
    /** Its tracestate, with it. */
    tracestate?: string;
    triggerKey: string;
    workflowId: string;
  };
}

export type ExecutionStatus = 'queued' | 'running' | 'succeeded' | 'failed';

/** One line of an execution's per-run log. */
export interface NodeRun {
  nodeId: string;
  type: string;
  startedAt: string;
  finishedAt?: string;
  status: 'running' | 'succeeded' | 'failed';
  attempts: number;
  /** Execution attempt this line belongs to; set when the workflow has a retry policy. */
  attempt?: number;
  /** Wall time of the node run including retries, once finished. */
  durationMs?: number;
  /** JSON of the node input, truncated to 1 KiB. */
  inputSummary?: string;
  /** JSON of the node output, truncated to 1 KiB. */
  outputSummary?: string;
  error?: string;
  /** Catalogue code of a failure with a stable cause: HG_ERR_OUTBOUND_REFUSED. */
  code?: ErrorCode;
}

/** What a respond (ResponseToWebhook) node sends back. */
export interface WebhookResponse {
  statusCode: number;
  headers: Record<string, string>;
  body: unknown;
}

export interface ExecutionError {
  message: string;
  nodeId?: string;
  /** Status a fail node asked for; otherwise 500. */
  statusCode?: number;
  /**
   * Catalogue code: HG_ERR_EXECUTION_FAILED (a node failed, a fail node ran, the step
   * limit was hit, the engine shut down, the trigger or workflow went away before a
   * worker ran it), HG_ERR_OUTBOUND_REFUSED (an http node's destination refused by the
   * outbound policy), HG_ERR_OUTPUT_SCHEMA (output validator) or HG_ERR_TRIGGER_RECREATED
   * (its trigger deleted and re-created under its name before a worker ran it).
   */
  code?: ErrorCode;
  /** The failure class (retry-policy.ts); absent in records written before retries. */
  kind?: FailureKind;
}

/** One finished attempt of an execution whose workflow has a retry policy. */
export interface AttemptRecord {
  attempt: number;
  startedAt: string;
  finishedAt: string;
  error: ExecutionError;
  /** The wait before the next attempt, when one was scheduled. */
  retryInMs?: number;
}

/** How the Async Callback of an execution went (set once delivery has ended). */
export interface CallbackOutcome {
  delivered: boolean;
  attempts: number;
  /** Status of the last response, if any. */
  status?: number;
  /** Why it was not delivered. */
  reason?: string;
  /** HG_ERR_OUTBOUND_REFUSED: the outbound policy refused the destination, nothing was sent. */
  code?: ErrorCode;
}

export interface Execution {
  id: string;
  workflowId: string;
  triggerKey: string;
  /**
   * The `metadata.uid` of the WebhookTrigger the request came in on (`TriggerRef.uid`):
   * which object of that name it was. A trigger deleted and re-created under the same
   * name has another, and this run's callback is not signed with the newcomer's secrets
   * (ADR 0035). Absent in records written before it was kept (and for a trigger whose
   * route had none): such a run is not checked. Not shown by the admin API.
   */
  triggerUid?: string;
  status: ExecutionStatus;
  createdAt: string;
  startedAt?: string;
  finishedAt?: string;
  input: TriggerOutput;
  output?: unknown;
  error?: ExecutionError;
  response?: WebhookResponse;
  log: NodeRun[];
  /** Attempt running or last run (1-based); absent: 1. */
  attempt?: number;
  /** When the next attempt is due, while the execution waits for it (status queued). */
  nextAttemptAt?: string;
  /** Attempts that failed before the one running or last run, oldest first. */
  failedAttempts?: AttemptRecord[];
  /** Set when the execution exhausted its retry policy and went to the dead-letter list. */
  deadLetteredAt?: string;
  /** The execution this one replays (admin replay, or a retry out of the dead-letter list). */
  replayOf?: string;
  /** Async Callback mode: the delivery's outcome, once it has ended. */
  callback?: CallbackOutcome;
  /**
   * The W3C context of the span that started the execution (the webhook request's
   * SERVER span), when tracing was on: each attempt's span is its child, in whichever
   * process runs it (ADR 0040). Not the caller's context (`input.metadata.traceparent`).
   */
  trace?: TraceCarrier;
  /**
   * SHA-256 (hex) of the caller's capability token for the public execution links
   * (gateway/execution-links.ts). Never the token itself; not shown by the admin API.
   */
  accessDigest?: string;
  /**
   * Parts a store kept cut to its stored-body limit (record-bounds.ts): each part's
   * whole size in bytes. The cut part is a string, the first bytes of its JSON (of the
   * text itself when it was a string). The workflow and a waiting caller got it whole.
   */
  truncated?: Truncated;
}

/** Which parts of a stored record or event were cut, with their whole size in bytes. */
export type Truncated = Partial<Record<'input.body' | 'output' | 'response.body', number>>;

export type ExecutionEvent =
  | { type: 'queued' }
  | { type: 'node.started'; nodeId: string; nodeType: string }
  | {
      type: 'node.finished';
      nodeId: string;
      status: 'succeeded' | 'failed';
      outputSummary?: string;
      error?: string;
    }
  | { type: 'respond'; response: WebhookResponse; truncated?: Truncated }
  | {
      type: 'attempt.failed';
      attempt: number;
      error: ExecutionError;
      retryInMs: number;
      nextAttemptAt: string;
    }
  | { type: 'attempt.started'; attempt: number }
  | { type: 'completed'; output: unknown; truncated?: Truncated }
  | { type: 'failed'; error: ExecutionError; deadLettered?: true };

/** An event with its position in the execution's stream (used for Last-Event-ID). */
export type SequencedEvent = ExecutionEvent & { executionId: string; seq: number; at: string };

/**
 * What a discarded success that came with an Idempotency-Key leaves for the key's window
 * (ADR 0041, amended 2026-11-28 (night)): that it ran, how it ended and when. A start of
 * its id that finds it runs nothing (HG_ERR_EXECUTION_DISCARDED).
 */
export interface Tombstone {
  status: 'succeeded';
  finishedAt: string;
}

/**
 * A subscriber's execution is gone from the store before its end reached the listener
 * (ExecutionEngine.subscribe's `onGone`): its events will never come.
 */
export interface ExecutionGone {
  /**
   * Its tombstone: it succeeded and its record was discarded (ADR 0041). Absent: nothing
   * is left to say how it ended (discarded without an Idempotency-Key, dropped by the
   * store's byte budget, expired).
   */
  discarded?: Tombstone;
}

export interface ExecutionFilter {
  workflowId?: string;
  triggerKey?: string;
  status?: ExecutionStatus;
  since?: string;
  until?: string;
  limit?: number;
  /** Continue after the last item of an earlier page (its `next`). Opaque. */
  cursor?: string;
  /** Stop a page once its items come to about this many bytes (at least one item). */
  maxBytes?: number;
  /**
   * Only executions whose trigger (`<namespace>/<name>`) this says yes to: the caller's
   * access, applied before the page is cut, so that a page is full while more of the
   * executions it may read exist, and its `next` names none of the others (the admin API
   * asks once per namespace). Absent: every execution.
   */
  triggerReadable?: (triggerKey: string) => boolean | Promise<boolean>;
}

/** One page of a listing: newest first; `next` is the cursor of the following page. */
export interface ExecutionPage {
  items: Execution[];
  next?: string;
}

/** Checks the final output (e.g. an ajv validator of the trigger's output schema). */
export type OutputValidator = (output: unknown) => { ok: true } | { ok: false; errors: string[] };

/**
 * What the engine knows of the endpoint an execution came in on: which trigger it is,
 * never how callers authenticate to it. Made from a route record with `triggerRef()`
 * (trigger-ref.ts); the record's credentials (API-key digests, JWT keys, the
 * introspection secret) stay with the gateway.
 */
export interface TriggerRef {
  /** `<namespace>/<name>` of the WebhookTrigger. */
  key: string;
  namespace: string;
  name: string;
  workflowId: string;
  /** Path template served, e.g. `/webhook/shop_production_orders/ingest/:id`. */
  path: string;
  /**
   * The WebhookTrigger's `metadata.uid` (the route record's): which object of that name
   * this is. Kept on the execution (`triggerUid`); a callback attempt whose route has
   * another uid treats the route as gone (ADR 0035). Absent: not known (an execution
   * from before uids were kept), and not checked.
   */
  uid?: string;
  /** Never present: a whole route record, which carries credentials, does not fit here. */
  credentials?: never;
}

export interface StartRequest {
  workflow: WorkflowRegistration;
  /** The trigger the request came in on (its key is the execution's `triggerKey`). */
  trigger: TriggerRef;
  /** `input.metadata.executionId`, when set, becomes the execution id (else one is made). */
  input: TriggerOutput;
  /** Optional: a violation fails the execution with code HG_ERR_OUTPUT_SCHEMA. */
  outputValidator?: OutputValidator;
  /**
   * Async Callback mode: POST the result here once the execution has finished
   * (validate it first with validateCallbackUrl). Needs an engine with a callback sender.
   */
  callbackUrl?: string;
  /**
   * The trigger's own callback signing secrets (response.callbackSecretRef), from its
   * route record; absent: the engine's. Never stored with the execution.
   */
  callbackSecrets?: readonly string[];
  /**
   * SHA-256 (hex) of the token the gateway gave the caller for the public execution
   * links; kept with the execution as `accessDigest`. A digest, not a credential.
   */
  accessDigest?: string;
  /** The execution this one replays: kept on the record as `replayOf`. */
  replayOf?: string;
  /** The span that starts the execution (tracing on): kept on the record as `trace`. */
  trace?: TraceCarrier;
  /**
   * The caller waits for this execution's events (a gateway's waiting modes) and its
   * workflow discards the records of succeeded executions: a store that publishes only
   * watched executions' events marks it watched as it queues it, so that a success
   * finished before the gateway listens still leaves its end to read (ADR 0041).
   */
  watched?: true;
  /**
   * Keep this execution's record should it succeed, whatever `workflow` says (ADR 0041,
   * amended 2026-11-28 (day)): the one that queued it saw a workflow that keeps the
   * records of succeeded executions. A worker sets it when the job does not say
   * `discardIfSucceeded` (a gateway whose view of the workflow said Keep, and so did not
   * mark the execution watched, or a gateway from before the field): a run discards only
   * when the view it was queued under and its own both say Discard (`discardsSuccess`).
   * Starters leave it out: a start's `workflow` is the view it is queued under.
   */
  keepRecord?: true;
  /**
   * The caller waits for a respond node's answer (Wait for Response Node): a run that
   * succeeds without one answered that caller with an error (500), and keeps its record
   * whatever its workflow says (ADR 0041, amended 2026-11-28 (day)). Set by the gateway
   * for a workflow that discards such records only (it changes nothing for others).
   */
  respondAwaited?: true;
  /**
   * The request came with an Idempotency-Key, kept by the gateway this long (ms). Should
   * this execution succeed and its record be discarded (ADR 0041), the store leaves a
   * tombstone for that long (`hinted`).
   */
  idempotencyWindowMs?: number;
  /**
   * The id is an Idempotency-Key's resume hint: an earlier request with the key asked
   * for this execution and got no answer, so it may have run, succeeded and been
   * discarded since. Only such a start looks for the tombstone; finding one, it runs
   * nothing and rejects with HG_ERR_EXECUTION_DISCARDED.
   */
  hinted?: true;
}

/**
 * What `start` resolves with: the execution, and `created: true` when this start wrote it.
 * Absent: its id existed already (an earlier start of it, e.g. the first try of a request
 * whose Idempotency-Key this one resumes), or an engine that does not say.
 */
export type StartedExecution = Execution & { created?: true };

export interface ExecutionEngine {
  /**
   * Queue one execution. Resolves once it is queued (before any 202 is sent).
   * Starting an id that already exists returns that execution and runs nothing; a
   * `hinted` start of an id whose succeeded execution was discarded (its tombstone)
   * rejects with HG_ERR_EXECUTION_DISCARDED and runs nothing.
   */
  start(request: StartRequest): Promise<StartedExecution>;
  get(id: string): Promise<Execution | undefined>;
  list(filter: ExecutionFilter): Promise<Execution[]>;
  /** `list` one page at a time: bounded by `limit` and `maxBytes`, continued by `cursor`. */
  page(filter: ExecutionFilter): Promise<ExecutionPage>;
  /**
   * Receive an execution's events with seq greater than `afterSeq` (replayed from
   * history first, then live). Returns the unsubscribe function. The replay may be
   * delivered before subscribe returns; after `completed` or `failed` the listener is
   * dropped by the engine (unsubscribing afterwards is harmless).
   *
   * `onGone`: called once, instead of any further event, when the engine finds the
   * execution gone from its store before its end reached the listener (a gateway whose
   * connection to the store's events was lost while the execution ended and its record
   * went: ADR 0041, amended 2026-11-28 (day)); the listener is dropped. Pass it only for
   * an execution known to be written (one that `start` or `get` returned): the engine
   * may then take one missing from its store for gone instead of not written yet. The
   * in-process engine never calls it: its listeners follow the running execution.
   */
  subscribe(
    id: string,
    afterSeq: number,
    listener: (event: SequencedEvent) => void,
    onGone?: (gone: ExecutionGone) => void,
  ): () => void;
}
