// What the gateway reports about every request to /webhook/*: the one feed that
// metrics, the analytics store and the live event stream read.
import type { ErrorCode } from '../errors.ts';

/** The route label of a request no route served. */
export const UNMATCHED_ROUTE = 'unmatched';

export interface RequestObservation {
  /** Epoch milliseconds when the request arrived. */
  at: number;
  application: string;
  environment: string;
  workflowId: string;
  /** `<namespace>/<name>` of the WebhookTrigger, or '' when no route matched. */
  triggerKey: string;
  method: string;
  /** Route template (never the raw path): `/webhook/<workflowId>/<pathSegment>`, or `unmatched`. */
  route: string;
  statusCode: number;
  /** Authenticated consumer id, when the route authenticates. */
  consumer?: string;
  durationSeconds: number;
  /** Catalogue code when the gateway answered with a problem. */
  problem?: ErrorCode;
  correlationId: string;
  requestId: string;
  executionId?: string;
}

export interface RequestObserver {
  observe(observation: RequestObservation): void;
}
