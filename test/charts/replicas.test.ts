// An HPA of your own (docs/scaling.md, "With a plain HPA"): with gateway.replicas or
// worker.replicas set to null the Deployment has no `replicas`, so `helm upgrade` never
// resets what the HPA chose.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  deployment,
  dryRunInstall,
  render,
  renderArgs,
  templateArgs,
  tools,
  work,
} from './chart.ts';

describe.skipIf(!tools)('chart: replicas left to an HPA', () => {
  it('renders no replicas for a role whose replicas are null', async () => {
    const objects = await render('worker.replicas=null', 'gateway.replicas=null');
    expect(deployment(objects, 'worker').spec).not.toHaveProperty('replicas');
    expect(deployment(objects, 'gateway').spec).not.toHaveProperty('replicas');
    expect(deployment(objects, 'operator').spec.replicas).toBe(2);
    // The same from a values file.
    const file = join(work, 'hpa-values.yaml');
    writeFileSync(file, 'gateway:\n  replicas: null\nworker:\n  replicas: null\n');
    const fromFile = await renderArgs([...templateArgs([]), '-f', file]);
    expect(deployment(fromFile, 'worker').spec).not.toHaveProperty('replicas');
    expect(deployment(fromFile, 'gateway').spec).not.toHaveProperty('replicas');
  });

  it('does not tell the install notes that no worker runs', async () => {
    const r = await dryRunInstall('worker.replicas=null');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).not.toContain('worker.replicas is 0');
  });
});
