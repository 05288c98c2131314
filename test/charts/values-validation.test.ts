// Values that render but cannot run are refused at `helm install`, by the schema or, for
// rules across keys, by the templates: ports that collide in the gateway's container
// (duplicate containerPort, EADDRINUSE at start), PodDisruptionBudgets that block every
// drain or are not an int-or-percent, and resource quantities Kubernetes would refuse.
import { describe, expect, it } from 'vitest';
import {
  container,
  deployment,
  find,
  helm,
  render,
  renderError,
  templateArgs,
  tools,
  type K8sObject,
} from './chart.ts';

interface PodDisruptionBudget extends K8sObject {
  spec: { maxUnavailable: number | string };
}

describe.skipIf(!tools)('chart: values that cannot run', () => {
  it('refuses an admin port that is the metrics or the webhook port, and metrics on the webhook port', async () => {
    expect(await renderError('admin.port=9090')).toContain(
      'admin.port (9090) must differ from metrics.port (9090)',
    );
    expect(await renderError('admin.port=9464', 'metrics.port=9464')).toContain(
      'admin.port (9464) must differ from metrics.port (9464)',
    );
    expect(await renderError('admin.port=8080')).toContain(
      "admin.port (8080) must differ from the gateway's webhook port 8080",
    );
    expect(await renderError('metrics.port=8080')).toContain(
      "metrics.port (8080) must differ from the gateway's webhook port 8080",
    );
    const moved = await render('admin.port=9091', 'metrics.port=9464');
    expect(container(deployment(moved, 'gateway')).ports.map((p) => p.containerPort)).toEqual([
      8080, 9464, 9091,
    ]);
  });

  it('refuses a PodDisruptionBudget that blocks every drain, or is not an int or a percentage', async () => {
    for (const bad of ['0', '0%', 'abc', '150%', '-1', '1.5']) {
      expect(
        await renderError(
          'podDisruptionBudget.enabled=true',
          `podDisruptionBudget.maxUnavailable=${bad}`,
        ),
        bad,
      ).toMatch(/\/podDisruptionBudget\/maxUnavailable/);
    }
    // A string must be a percentage (IntOrString): "1" is not an int.
    const quoted = await helm([
      ...templateArgs(['podDisruptionBudget.enabled=true']),
      ...['--set-string', 'podDisruptionBudget.maxUnavailable=1'],
    ]);
    expect(quoted.code).not.toBe(0);
    expect(quoted.stderr).toMatch(/\/podDisruptionBudget\/maxUnavailable/);
    for (const good of ['1', '2', '25%', '100%']) {
      const objects = await render(
        'podDisruptionBudget.enabled=true',
        `podDisruptionBudget.maxUnavailable=${good}`,
      );
      const pdb = find<PodDisruptionBudget>(objects, 'PodDisruptionBudget', 'hg-hookgate-gateway');
      expect(String(pdb.spec.maxUnavailable), good).toBe(good);
    }
  });

  it('refuses negative and malformed resource quantities', async () => {
    for (const bad of [
      'gateway.resources.requests.cpu=-1',
      'worker.resources.requests.memory=-256Mi',
      'operator.resources.limits.memory=256MB',
      'redis.resources.limits.memory=lots',
      'gateway.resources.requests.cpu=1.5 cores',
      'worker.resources.limits.ephemeral-storage=1KiB',
    ]) {
      const [key] = bad.split('=');
      expect(await renderError(bad), bad).toContain(`/${(key ?? '').replaceAll('.', '/')}`);
    }
    const objects = await render(
      'gateway.resources.requests.cpu=1500m',
      'worker.resources.requests.cpu=0.5',
      'operator.resources.limits.memory=1e9',
      'redis.resources.limits.memory=2Gi',
      'worker.resources.limits.ephemeral-storage=1G',
    );
    expect(container(deployment(objects, 'gateway')).resources.requests?.['cpu']).toBe('1500m');
  });
});
