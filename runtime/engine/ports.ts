// The execution engine port: what the gateway asks of the engine, whichever adapter
// (in-process, or a Redis queue with workers) runs the workflow.
import type { RouteRecord, WorkflowRegistration } from '../stores/ports.ts';

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
    /** Route template, e.g. /webhook/shop-production-orders/ingest/:id */
    route: string;
    contentType?: string;
    consumer?: string;
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
  inputSummary?: string;
  outputSummary?: string;
  error?: string;
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
}

export interface Execution {
  id: string;
  workflowId: string;
  triggerKey: string;
  status: ExecutionStatus;
  createdAt: string;
  startedAt?: string;
  finishedAt?: string;
  input: TriggerOutput;
  output?: unknown;
  error?: ExecutionError;
  response?: WebhookResponse;
  log: NodeRun[];
}

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
  | { type: 'respond'; response: WebhookResponse }
  | { type: 'completed'; output: unknown }
  | { type: 'failed'; error: ExecutionError };

/** An event with its position in the execution's stream (used for Last-Event-ID). */
export type SequencedEvent = ExecutionEvent & { executionId: string; seq: number; at: string };

export interface ExecutionFilter {
  workflowId?: string;
  triggerKey?: string;
  status?: ExecutionStatus;
  since?: string;
  until?: string;
  limit?: number;
}

export interface StartRequest {
  workflow: WorkflowRegistration;
  route: RouteRecord;
  input: TriggerOutput;
}

export interface ExecutionEngine {
  /** Queue one execution. Resolves once it is queued (before any 202 is sent). */
  start(request: StartRequest): Promise<Execution>;
  get(id: string): Promise<Execution | undefined>;
  list(filter: ExecutionFilter): Promise<Execution[]>;
  /**
   * Receive an execution's events with seq greater than `afterSeq` (replayed from
   * history first, then live). Returns the unsubscribe function.
   */
  subscribe(id: string, afterSeq: number, listener: (event: SequencedEvent) => void): () => void;
}
