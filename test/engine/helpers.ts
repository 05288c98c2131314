// Builders for engine tests: a workflow registration, a route (and the engine's view
// of it) and a trigger output.
import type { WorkflowNode, WorkflowSpec } from '../../api/v1alpha1/workflow.ts';
import type {
  Execution,
  ExecutionEngine,
  SequencedEvent,
  StartRequest,
  TriggerOutput,
  TriggerRef,
} from '../../runtime/engine/ports.ts';
import type { InProcessEngine } from '../../runtime/engine/engine.ts';
import { triggerRef } from '../../runtime/engine/trigger-ref.ts';
import type { RouteRecord, WorkflowRegistration } from '../../api/records/records.ts';

let generation = 0;

export function workflow(
  nodes: Partial<WorkflowNode>[],
  extra: Partial<WorkflowSpec> = {},
  workflowId = 'shop_development_orders',
): WorkflowRegistration {
  generation++;
  return {
    workflowId,
    namespace: 'shop',
    name: 'orders',
    generation,
    application: 'shop',
    environment: 'development',
    spec: {
      publish: true,
      application: 'shop',
      environment: 'development',
      nodes: nodes as WorkflowNode[],
      ...extra,
    },
  };
}

export function route(
  key = 'shop/orders-hook',
  workflowId = 'shop_development_orders',
): RouteRecord {
  return {
    key,
    namespace: 'shop',
    name: key.split('/')[1] ?? 'hook',
    uid: 'uid-1',
    generation: 1,
    workflowId,
    path: `/webhook/${workflowId}/ingest`,
    application: 'shop',
    environment: 'development',
    spec: {} as RouteRecord['spec'],
    credentials: {},
  };
}

/** The engine's view of `route(key, workflowId)`. */
export function ref(key = 'shop/orders-hook', workflowId = 'shop_development_orders'): TriggerRef {
  return triggerRef(route(key, workflowId));
}

export function trigger(body: unknown, executionId = ''): TriggerOutput {
  return {
    body,
    headers: { 'content-type': 'application/json' },
    query: { page: '2' },
    params: { id: '42' },
    metadata: {
      timestamp: new Date().toISOString(),
      correlationId: 'corr-1',
      requestId: 'req-1',
      executionId,
      method: 'POST',
      path: '/webhook/shop_development_orders/ingest/42',
      route: '/webhook/shop_development_orders/ingest/:id',
      contentType: 'application/json',
      triggerKey: 'shop/orders-hook',
      workflowId: 'shop_development_orders',
    },
  };
}

/** A finished execution record as a store keeps it, created at `createdMs`. */
export function storedExecution(
  id: string,
  createdMs: number,
  extra: Partial<Execution> = {},
): Execution {
  return {
    id,
    workflowId: 'w',
    triggerKey: 't',
    status: 'succeeded',
    createdAt: new Date(createdMs).toISOString(),
    input: trigger({}),
    log: [],
    ...extra,
  };
}

/** The queued record an engine makes of `request` (the id its metadata names, or `id`). */
export function queuedExecution(
  request: Pick<StartRequest, 'workflow' | 'trigger' | 'input'>,
  id = request.input.metadata.executionId,
): Execution {
  return {
    id,
    workflowId: request.workflow.workflowId,
    triggerKey: request.trigger.key,
    status: 'queued',
    createdAt: new Date().toISOString(),
    input: request.input,
    log: [],
  };
}

/** The record of an execution of `route()` that failed and was dead-lettered just now. */
export function deadLetteredExecution(id: string, extra: Partial<Execution> = {}): Execution {
  const at = new Date().toISOString();
  return storedExecution(id, Date.parse(at), {
    workflowId: 'shop_development_orders',
    triggerKey: 'shop/orders-hook',
    status: 'failed',
    finishedAt: at,
    deadLetteredAt: at,
    error: { message: 'down' },
    ...extra,
  });
}

/** Resolves with the finished execution (waits for its terminal event). */
export function finished(engine: ExecutionEngine, id: string): Promise<Execution> {
  return new Promise((resolve, reject) => {
    engine.subscribe(id, 0, (event: SequencedEvent) => {
      if (event.type === 'completed' || event.type === 'failed') {
        engine.get(id).then((e) => (e ? resolve(e) : reject(new Error('gone'))), reject);
      }
    });
  });
}

/** Starts a workflow and waits for it to finish. */
export async function run(
  engine: InProcessEngine,
  nodes: Partial<WorkflowNode>[],
  body: unknown = { n: 1 },
  extra: Partial<WorkflowSpec> = {},
): Promise<Execution> {
  const execution = await engine.start({
    workflow: workflow(nodes, extra),
    trigger: ref(),
    input: trigger(body),
  });
  return finished(engine, execution.id);
}

/**
 * What `value` holds, at any depth, of the given secrets or of a `credentials` key:
 * empty when none of it reached there.
 */
export function credentialLeaks(value: unknown, secrets: string[]): string[] {
  const found: string[] = [];
  const visit = (v: unknown, at: string): void => {
    if (typeof v === 'string') {
      for (const s of secrets) if (v.includes(s)) found.push(`${at} holds ${s.slice(0, 8)}…`);
    } else if (Array.isArray(v)) {
      v.forEach((item, i) => visit(item, `${at}[${i}]`));
    } else if (typeof v === 'object' && v !== null) {
      for (const [key, item] of Object.entries(v)) {
        if (key === 'credentials') found.push(`${at}.credentials`);
        visit(item, `${at}.${key}`);
      }
    }
  };
  visit(value, '$');
  return found;
}
