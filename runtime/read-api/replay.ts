// Replay: a stored request (an execution's trigger record) sent through its trigger
// again as a new execution, linked to the original by `replayOf`, with what the trigger
// and its workflow are NOW (route record, input schema, output schema, published
// workflow). Used by the replay endpoint and by retries out of the dead-letter list
// (recovery-routes.ts). Refusals are catalogued problems: the trigger or workflow gone
// (409), the trigger deleted and re-created under its name since the request came in
// (409, unless asked: ADR 0018, amended 2026-11-28), the stored body cut by the store
// (409), the body rejected by the current input schema (422 with the violations).
import { randomUUID } from 'node:crypto';
import type { RouteRecord, RouteStore, WorkflowRegistration } from '../../api/records/records.ts';
import { HttpProblem } from '../errors.ts';
import { outputValidatorFor } from '../engine/output-validator.ts';
import type { Execution, ExecutionEngine, StartRequest, TriggerOutput } from '../engine/ports.ts';
import { callbackSigning, runSigning, triggerRef } from '../engine/trigger-ref.ts';
import { schemasFor } from '../gateway/body/schemas.ts';

export interface ReplaySources {
  engine: ExecutionEngine;
  routes: RouteStore;
  /** The published workflow by id (the route table's registry). */
  workflow(workflowId: string): WorkflowRegistration | undefined;
}

/** What a replay needs once its checks have passed: the request to start. */
export interface ReplayPlan {
  route: RouteRecord;
  request: StartRequest;
}

export interface ReplayOptions {
  /**
   * Deliver the result there (a dead-letter retry keeps the original caller's callback;
   * a replay has none). Dropped when the trigger was re-created (`allowRecreated`).
   */
  callbackUrl?: string;
  /**
   * Send the request through the trigger of its name even when that is another
   * WebhookTrigger than the one it came in on (deleted and re-created since: another
   * uid); without it, that is refused (409 replay-trigger-recreated). The run then has
   * no callback: the earlier caller's URL is not posted to with the newcomer's secrets.
   */
  allowRecreated?: boolean;
}

/**
 * Checks that `original` can be sent again and builds its start request; throws the
 * refusal as an HttpProblem.
 */
export async function planReplay(
  sources: ReplaySources,
  original: Execution,
  options: ReplayOptions = {},
): Promise<ReplayPlan> {
  const route = await sources.routes.get(original.triggerKey);
  const workflow = route ? sources.workflow(route.workflowId) : undefined;
  if (!route || !workflow) {
    throw new HttpProblem(
      'HG_ERR_REPLAY_TRIGGER_GONE',
      route
        ? `The workflow ${route.workflowId} of WebhookTrigger ${original.triggerKey} is not published`
        : `WebhookTrigger ${original.triggerKey} is not deployed any more`,
      { extensions: { executionId: original.id, trigger: original.triggerKey } },
    );
  }
  // Another WebhookTrigger of its name now (another uid): the rule of the worker and the
  // callbacks (runSigning). A record from before uids were kept (none) is not checked, as
  // before; nor is a route without one.
  const signing = runSigning(original.triggerUid, route);
  if ('unsigned' in signing && options.allowRecreated !== true) {
    throw new HttpProblem(
      'HG_ERR_REPLAY_TRIGGER_RECREATED',
      `WebhookTrigger ${original.triggerKey} was deleted and re-created since ${original.id} came in (another uid): its request is not sent through the new trigger unless asked (allowRecreated=true; a dead-letter retry then sends no callback)`,
      { extensions: { executionId: original.id, trigger: original.triggerKey } },
    );
  }
  // Asked (allowRecreated): sent without the callback, which nothing may sign.
  const callback =
    options.callbackUrl && 'secrets' in signing
      ? { callbackUrl: options.callbackUrl, ...callbackSigning(signing) }
      : {};
  const cut = original.truncated?.['input.body'];
  if (cut !== undefined) {
    throw new HttpProblem(
      'HG_ERR_REPLAY_BODY_TRUNCATED',
      `The stored request body of ${original.id} was cut to the store's limit (it had ${cut} bytes)`,
      { extensions: { executionId: original.id, bodyBytes: cut } },
    );
  }
  const validate = schemasFor(route).input;
  const errors = validate ? validate(original.input.body) : [];
  if (errors.length > 0) {
    throw new HttpProblem(
      'HG_ERR_REPLAY_SCHEMA_REJECTED',
      `The stored request body of ${original.id} does not match the current input schema of ${route.key} (${errors.length} ${errors.length === 1 ? 'problem' : 'problems'}).`,
      { extensions: { executionId: original.id, errors } },
    );
  }
  const outputValidator = outputValidatorFor(route);
  const request: StartRequest = {
    workflow,
    trigger: triggerRef(route),
    input: replayInput(original.input, route),
    replayOf: original.id,
    ...(outputValidator ? { outputValidator } : {}),
    ...callback,
  };
  return { route, request };
}

/**
 * The stored trigger record as a new request: body, headers, query, params, method and
 * path as they came in (credentials were never stored), a new request id and time, the
 * correlation id kept, and the trigger's current route and workflow.
 */
function replayInput(stored: TriggerOutput, route: RouteRecord): TriggerOutput {
  const input = structuredClone(stored);
  input.metadata = {
    ...input.metadata,
    timestamp: new Date().toISOString(),
    requestId: randomUUID(),
    executionId: '',
    route: route.path,
    triggerKey: route.key,
    workflowId: route.workflowId,
  };
  return input;
}
