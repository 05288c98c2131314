// The operator's V8 heap is sized for its memory limit (operator.nodeOptions), as the
// operator scale benchmark measured it: without it the heap grows for the node, not the pod.
import { describe, expect, it } from 'vitest';
import { container, deployment, envOf, render, tools } from './chart.ts';

describe.skipIf(!tools)('chart: operator memory', () => {
  it('sets NODE_OPTIONS on the operator only, under a 256Mi limit', async () => {
    const objects = await render();
    const operator = container(deployment(objects, 'operator'));
    expect(envOf(operator).get('NODE_OPTIONS')?.value).toBe(
      '--max-old-space-size=160 --max-semi-space-size=2',
    );
    expect(operator.resources).toMatchObject({ limits: { memory: '256Mi' } });
    for (const role of ['gateway', 'worker'])
      expect(envOf(container(deployment(objects, role))).has('NODE_OPTIONS')).toBe(false);
  });

  it('leaves Node its default heap when nodeOptions is empty', async () => {
    const operator = container(deployment(await render('operator.nodeOptions='), 'operator'));
    expect(envOf(operator).has('NODE_OPTIONS')).toBe(false);
  });
});
