// config.callbackSecret: the Secret whose key holds the callback signing secrets reaches
// the processes that send Async Callbacks (workers, and gateways running executions
// inline) as the file HOOKGATE_CALLBACK_SECRET_FILE names; the others never mount it.
import { posix } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  container,
  deployment,
  envOf,
  render,
  renderError,
  tools,
  type Deployment,
} from './chart.ts';

const FILE_VAR = 'HOOKGATE_CALLBACK_SECRET_FILE';

/** The file the variable names, and which Secret key is mounted there (or undefined). */
function mountedKey(d: Deployment): { file?: string; secret?: string; key?: string } {
  const c = container(d);
  const file = envOf(c).get(FILE_VAR)?.value;
  if (file === undefined) return {};
  const mount = (c.volumeMounts ?? []).find((m) => file.startsWith(`${m.mountPath}/`));
  const volume = d.spec.template.spec.volumes.find((v) => v.name === mount?.name);
  const item = volume?.secret?.items?.find(
    (i) => posix.join(mount?.mountPath ?? '', i.path) === file,
  );
  return { file, secret: volume?.secret?.secretName, key: item?.key };
}

describe.skipIf(!tools)('chart: callback signing secrets', () => {
  it('mounts nothing and sets nothing by default', async () => {
    const objects = await render();
    for (const role of ['operator', 'gateway', 'worker'] as const) {
      const d = deployment(objects, role);
      expect(envOf(container(d)).has(FILE_VAR), role).toBe(false);
      expect(d.spec.template.spec.volumes.some((v) => v.secret)).toBe(false);
    }
  });

  it('gives the workers the Secret key as the file the variable names; queue gateways never', async () => {
    const objects = await render('config.callbackSecret.name=cb-signing');
    expect(mountedKey(deployment(objects, 'worker'))).toEqual({
      file: '/var/run/hookgate/callbacks/secrets',
      secret: 'cb-signing',
      key: 'secrets',
    });
    for (const role of ['gateway', 'operator'] as const) {
      const d = deployment(objects, role);
      expect(mountedKey(d), role).toEqual({});
      expect(d.spec.template.spec.volumes.some((v) => v.secret?.secretName === 'cb-signing')).toBe(
        false,
      );
    }
  });

  it('gives gateways running executions inline the same, from the key named', async () => {
    const objects = await render(
      'gateway.executions=inline',
      'config.callbackSecret.name=cb-signing',
      'config.callbackSecret.key=current',
    );
    expect(mountedKey(deployment(objects, 'gateway'))).toMatchObject({
      secret: 'cb-signing',
      key: 'current',
    });
  });

  it('refuses a name or key no Secret can have', async () => {
    expect(await renderError('config.callbackSecret.name=Not_A_Name')).toMatch(
      /callbackSecret\/name/,
    );
    expect(
      await renderError('config.callbackSecret.name=ok', 'config.callbackSecret.key=a b'),
    ).toMatch(/callbackSecret\/key/);
  });
});
