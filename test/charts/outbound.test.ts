// outbound.*: the outbound policy reaches the roles that send requests (gateway, worker)
// as the HOOKGATE_OUTBOUND_* variables the settings parse; the schema refuses bad values.
import { describe, expect, it } from 'vitest';
import { outboundSettings } from '../../roles/outbound-settings.ts';
import {
  container,
  deployment,
  envOf,
  render,
  renderValuesError,
  renderWithValues,
  renderError,
  tools,
} from './chart.ts';

const NAMES = ['HOOKGATE_OUTBOUND_ALLOW', 'HOOKGATE_OUTBOUND_DENY', 'HOOKGATE_OUTBOUND_NAMESPACES'];

const values = {
  outbound: {
    allow: ['*.svc.cluster.local', '10.96.0.0/12', 'receiver.test:8443'],
    deny: ['*.kube-system.svc.cluster.local', '203.0.113.0/24'],
    namespaces: {
      payments: { allow: ['*.payments.svc.cluster.local', 'api.stripe.com'] },
      sandbox: { deny: ['10.0.0.0/8'] },
    },
  },
};

describe.skipIf(!tools)('chart: outbound policy', () => {
  it('sets nothing by default: public destinations only', async () => {
    const objects = await render();
    for (const role of ['operator', 'gateway', 'worker'] as const) {
      const env = envOf(container(deployment(objects, role)));
      for (const name of NAMES) expect(env.has(name), `${role} ${name}`).toBe(false);
    }
  });

  it('hands the policy to the gateway and the worker, in the form the settings read', async () => {
    const objects = await renderWithValues([], values);
    for (const role of ['gateway', 'worker'] as const) {
      const env = envOf(container(deployment(objects, role)));
      const vars = Object.fromEntries(NAMES.map((n) => [n, env.get(n)?.value]));
      expect(vars.HOOKGATE_OUTBOUND_ALLOW).toBe(
        '*.svc.cluster.local,10.96.0.0/12,receiver.test:8443',
      );
      const parsed = outboundSettings(vars);
      expect(parsed.problems).toEqual([]);
      expect(parsed.options).toEqual({
        allow: values.outbound.allow,
        deny: values.outbound.deny,
        namespaces: {
          payments: { allow: values.outbound.namespaces.payments.allow, deny: [] },
          sandbox: { allow: [], deny: values.outbound.namespaces.sandbox.deny },
        },
      });
    }
    const operator = envOf(container(deployment(objects, 'operator')));
    expect(operator.has('HOOKGATE_OUTBOUND_ALLOW')).toBe(false);
  });

  it('the schema refuses unknown keys, malformed entries and namespace names', async () => {
    expect(await renderError('outbound.allowed={10.0.0.0/8}')).toMatch(/allowed/);
    expect(await renderError('outbound.allow={exa mple.com}')).toMatch(/outbound/);
    expect(
      await renderValuesError([], {
        outbound: { namespaces: { Team_B: { allow: ['x.example'] } } },
      }),
    ).toMatch(/Team_B/);
  });
});
