// How the chart's pods stop. A role's own shutdown ends 25 s after SIGTERM
// (roles/lifecycle.ts SHUTDOWN_GRACE_MS), and the gateway's SIGTERM comes after its
// preStop sleep, so terminationGracePeriodSeconds must leave both plus a margin, or the
// kubelet's SIGKILL lands together with the process' own forced exit. An operator
// without leader election must never run twice, not even during a rollout.
import { describe, expect, it } from 'vitest';
import { deployment, render, renderError, tools, type Deployment } from './chart.ts';

const grace = (d: Deployment) => d.spec.template.spec.terminationGracePeriodSeconds;
const strategy = (d: Deployment) => d.spec.strategy;

describe.skipIf(!tools)('chart: stopping the pods', () => {
  it("gives the gateway its preStop sleep, the process' 25 s and 5 s more", async () => {
    const objects = await render();
    expect(grace(deployment(objects, 'gateway'))).toBe(35);
    expect(grace(deployment(objects, 'worker'))).toBe(30);
    expect(grace(deployment(objects, 'operator'))).toBe(30);
    const longer = await render(
      'gateway.preStopSleepSeconds=10',
      'gateway.terminationGracePeriodSeconds=37',
    );
    expect(grace(deployment(longer, 'gateway'))).toBe(37);
  });

  it('refuses a grace period the process would not finish in, naming both values', async () => {
    const error = await renderError('gateway.terminationGracePeriodSeconds=30');
    expect(error).toContain(
      'gateway.terminationGracePeriodSeconds (30) must be at least gateway.preStopSleepSeconds (5) + 25 + 1 + 1 = 32',
    );
    expect(await renderError('gateway.preStopSleepSeconds=10')).toContain(
      'gateway.terminationGracePeriodSeconds (35) must be at least gateway.preStopSleepSeconds (10) + 25 + 1 + 1 = 37',
    );
    // Workers have no preStop hook: 25 s, the default 1 s write, and a second's margin.
    expect(await renderError('worker.terminationGracePeriodSeconds=26')).toContain(
      'worker.terminationGracePeriodSeconds (26) must be at least 27',
    );
    await render('worker.terminationGracePeriodSeconds=27');
    // No workers, no rule.
    await render('gateway.executions=inline', 'worker.terminationGracePeriodSeconds=5');
  });

  it('leaves the forced exit its write of the last log lines (config.logOutput.syncFlushMs)', async () => {
    // Up to 4 s, in whole seconds, and a second's margin: the defaults (35, 30) leave
    // 5 s after the 25.
    await render('config.logOutput.syncFlushMs=4000');
    expect(
      await renderError(
        'config.logOutput.syncFlushMs=2001',
        'gateway.terminationGracePeriodSeconds=33',
      ),
    ).toContain(
      'gateway.terminationGracePeriodSeconds (33) must be at least gateway.preStopSleepSeconds (5) + 25 + 3 + 1 = 34',
    );
    expect(
      await renderError(
        'config.logOutput.syncFlushMs=4000',
        'worker.terminationGracePeriodSeconds=29',
      ),
    ).toContain(
      'worker.terminationGracePeriodSeconds (29) must be at least 30: after SIGTERM the process drains for up to 25 s, then exits by force and writes its last log lines for up to config.logOutput.syncFlushMs (4000 ms), and needs a second of margin',
    );
    // A second's margin even with no write at all.
    expect(
      await renderError(
        'config.logOutput.syncFlushMs=0',
        'worker.terminationGracePeriodSeconds=25',
      ),
    ).toContain('worker.terminationGracePeriodSeconds (25) must be at least 26');
  });

  it('replaces the operator pod (Recreate) when it runs without leader election', async () => {
    const single = await render('operator.replicas=1', 'operator.leaderElection.enabled=false');
    expect(strategy(deployment(single, 'operator'))).toEqual({ type: 'Recreate' });
    // With a Lease a rollout may overlap: only the leader reconciles.
    const elected = await render();
    expect(strategy(deployment(elected, 'operator'))).toBeUndefined();
    expect(strategy(deployment(await render('operator.replicas=1'), 'operator'))).toBeUndefined();
  });
});
