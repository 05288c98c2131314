// The bench manifests' endpoints, as the URL scheme of this checkout builds them, and
// the READY line every bench server prints: `READY <port> <JSON map of name to path>`.
import { routePath, workflowIdentifier } from '../../api/identity.ts';

const path = (workflow: string, segment: string) =>
  routePath(workflowIdentifier('default', 'production', workflow), segment);

/** Target name (see run.ts) to path. */
export const benchPaths = {
  ack: path('bench', 'ack'),
  wait: path('bench', 'wait'),
  minimal: path('minimal', 'ack'),
  minimalDiscard: path('minimal-discard', 'ack'),
};

/** Waits until the reconcile loop has deployed every bench route. */
export async function waitForRoutes(table: { size: number }): Promise<void> {
  const expected = Object.keys(benchPaths).length;
  for (let i = 0; i < 400 && table.size < expected; i++)
    await new Promise((r) => setTimeout(r, 25));
  if (table.size < expected)
    throw new Error(`bench routes did not deploy (${table.size}/${expected})`);
}

export function ready(address: string): void {
  console.log(`READY ${new URL(address).port} ${JSON.stringify(benchPaths)}`);
}
