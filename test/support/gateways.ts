// Gateways for reconcile tests: report that a gateway serves exactly what the route
// store and the workflow registry hold, as a gateway would after its next table swap.
import type { GatewayStore } from '../../api/records/gateways.ts';
import type { RecordStore, RouteRecord, WorkflowRegistration } from '../../api/records/records.ts';

let revision = 0;

export async function reportServing(
  gateways: GatewayStore,
  gateway: string,
  routes: RecordStore<RouteRecord>,
  workflows: RecordStore<WorkflowRegistration>,
  ttlMs = 60_000,
): Promise<void> {
  const known = new Set((await workflows.list()).map((w) => w.workflowId));
  await gateways.report({
    gateway,
    revision: ++revision,
    full: true,
    serve: (await routes.list()).map((r) => [
      r.key,
      { generation: r.generation, workflow: known.has(r.workflowId) },
    ]),
    drop: [],
    ttlMs,
  });
}
