// extraEnv: variables of your own for the gateway, the worker and the operator
// (NODE_OPTIONS, a proxy, ...), after the chart's; the schema takes Kubernetes EnvVars
// only, and a name the chart sets itself is refused (a duplicate env name is rejected by
// server-side apply, and would silently override what the chart checks, e.g.
// HOOKGATE_ADMIN_AUTH).
import { describe, expect, it } from 'vitest';
import { ROLES, container, deployment, envOf, render, renderError, tools } from './chart.ts';

describe.skipIf(!tools)('chart: extraEnv', () => {
  it('adds each role its own variables, after the chart’s', async () => {
    const objects = await render(
      'gateway.extraEnv[0].name=NODE_OPTIONS',
      'gateway.extraEnv[0].value=--max-old-space-size=384',
      'worker.extraEnv[0].name=HTTPS_PROXY',
      'worker.extraEnv[0].valueFrom.secretKeyRef.name=proxy',
      'worker.extraEnv[0].valueFrom.secretKeyRef.key=url',
      'operator.nodeOptions=',
      'operator.extraEnv[0].name=NODE_OPTIONS',
      'operator.extraEnv[0].value=--max-old-space-size=512',
      'operator.extraEnv[1].name=NODE_NAME',
      'operator.extraEnv[1].valueFrom.fieldRef.fieldPath=spec.nodeName',
    );
    const env = (role: string) => container(deployment(objects, role)).env;
    expect(env('gateway').at(-1)).toEqual({
      name: 'NODE_OPTIONS',
      value: '--max-old-space-size=384',
    });
    expect(env('worker').at(-1)).toEqual({
      name: 'HTTPS_PROXY',
      valueFrom: { secretKeyRef: { name: 'proxy', key: 'url' } },
    });
    expect(env('operator').slice(-2)).toEqual([
      { name: 'NODE_OPTIONS', value: '--max-old-space-size=512' },
      { name: 'NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
    ]);
    // Each role only its own; the chart's variables are all still there.
    expect(envOf(container(deployment(objects, 'worker'))).has('NODE_OPTIONS')).toBe(false);
    const defaults = await render();
    for (const role of ROLES) {
      const names = env(role).map((e) => e.name);
      for (const e of container(deployment(defaults, role)).env) {
        if (!(role === 'operator' && e.name === 'NODE_OPTIONS'))
          expect(names, role).toContain(e.name);
      }
      // No name twice: server-side apply refuses duplicate keys of env.
      expect(new Set(names).size, role).toBe(names.length);
    }
  });

  it('refuses a variable the chart sets, saying what to use instead', async () => {
    expect(
      await renderError(
        'gateway.extraEnv[0].name=HOOKGATE_ADMIN_AUTH',
        'gateway.extraEnv[0].value=none',
      ),
    ).toContain('gateway.extraEnv sets HOOKGATE_ADMIN_AUTH, which the chart sets itself');
    expect(
      await renderError('operator.extraEnv[0].name=NODE_OPTIONS', 'operator.extraEnv[0].value=--x'),
    ).toContain(
      'operator.extraEnv sets NODE_OPTIONS, which the chart sets itself (operator.nodeOptions',
    );
    expect(
      await renderError(
        'worker.extraEnv[0].name=A',
        'worker.extraEnv[0].value=one',
        'worker.extraEnv[1].name=A',
        'worker.extraEnv[1].value=two',
      ),
    ).toContain('worker.extraEnv sets A twice');
  });

  it('takes only EnvVars: a name, and a value or a valueFrom of a known kind', async () => {
    for (const bad of [
      ['gateway.extraEnv[0].value=x'],
      ['worker.extraEnv[0].name=1BAD', 'worker.extraEnv[0].value=x'],
      ['operator.extraEnv[0].name=A', 'operator.extraEnv[0].valu=x'],
      ['gateway.extraEnv[0].name=A', 'gateway.extraEnv[0].valueFrom.vaultRef.path=x'],
      ['gateway.extraEnv[0].name=A', 'gateway.extraEnv[0].valueFrom.secretKeyRef.name=s'],
    ]) {
      expect(await renderError(...bad), bad.join(' ')).toMatch(
        /\/(gateway|worker|operator)\/extraEnv\/0/,
      );
    }
    expect(await renderError('gateway.extraEnv=NODE_OPTIONS')).toMatch(/\/gateway\/extraEnv/);
  });
});
