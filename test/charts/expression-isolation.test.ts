// config.expressionIsolation (ADR 0048): the roles that run executions (gateways, for
// inline executions, and workers) get HOOKGATE_EXPRESSION_ISOLATION=worker when it is
// worker, and nothing (the roles' default, inline) otherwise; the operator never.
import { describe, expect, it } from 'vitest';
import { container, deployment, envOf, render, renderError, tools } from './chart.ts';

describe.skipIf(!tools)('chart: config.expressionIsolation', () => {
  it('sets HOOKGATE_EXPRESSION_ISOLATION on gateways and workers when worker', async () => {
    const env = (objects: Awaited<ReturnType<typeof render>>, role: string) =>
      envOf(container(deployment(objects, role))).get('HOOKGATE_EXPRESSION_ISOLATION');
    const worker = await render('config.expressionIsolation=worker');
    expect(env(worker, 'gateway')).toEqual({
      name: 'HOOKGATE_EXPRESSION_ISOLATION',
      value: 'worker',
    });
    expect(env(worker, 'worker')).toEqual({
      name: 'HOOKGATE_EXPRESSION_ISOLATION',
      value: 'worker',
    });
    expect(env(worker, 'operator')).toBeUndefined();
    const defaults = await render();
    for (const role of ['gateway', 'worker', 'operator']) {
      expect(env(defaults, role)).toBeUndefined();
    }
  });

  it('refuses another value', async () => {
    await expect(renderError('config.expressionIsolation=thread')).resolves.toMatch(
      /expressionIsolation/,
    );
  });
});
