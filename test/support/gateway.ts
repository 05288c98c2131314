// A dev runtime over a temporary manifest directory, for gateway tests.
import type { DirectorySource } from '../../operator/sources/directory.ts';
import { createDevRuntime, type DevOptions, type DevRuntime } from '../../roles/dev.ts';
import { eventually } from './eventually.ts';
import { manifestDir } from './manifests.ts';

/** A dev runtime whose resources a test writes (a folder here, or an API server). */
export interface ControlRuntime extends DevRuntime {
  /**
   * Write the objects of `file` (objects it held before and no longer holds are
   * removed) and wait until the named triggers are Ready.
   */
  apply(file: string, docs: object[], readyTriggers?: string[]): Promise<void>;
  stop(): Promise<void>;
}

export interface TestRuntime extends ControlRuntime {
  files: Awaited<ReturnType<typeof manifestDir>>;
}

/**
 * Wait until the named triggers (namespace default) are Ready (with `currentGeneration`:
 * for their current generation, not a status left from before), and the route table
 * serves at least that many routes.
 */
export async function readyTriggers(
  runtime: DevRuntime,
  names: string[],
  currentGeneration = false,
): Promise<void> {
  await eventually(() => {
    for (const name of names) {
      const t = runtime.source.get({ kind: 'WebhookTrigger', namespace: 'default', name });
      const status = t?.status as
        | { observedGeneration?: number; conditions?: { type: string; status: string }[] }
        | undefined;
      const ready = status?.conditions?.find((c) => c.type === 'Ready');
      const stale = currentGeneration && status?.observedGeneration !== t?.metadata.generation;
      if (ready?.status !== 'True' || stale)
        throw new Error(`trigger ${name} not Ready: ${JSON.stringify(t?.status)}`);
    }
    const routes = runtime.table.size;
    if (names.length > routes) throw new Error('route table not refreshed');
  });
  await runtime.table.refresh();
}

export async function startRuntime(options: Partial<DevOptions> = {}): Promise<TestRuntime> {
  const files = await manifestDir();
  const runtime = await createDevRuntime({
    dir: files.dir,
    baseUrl: 'http://localhost',
    ...options,
  });
  return {
    ...runtime,
    files,
    async apply(file, docs, ready = []) {
      await files.write(file, ...docs);
      await (runtime.source as DirectorySource).reload();
      await readyTriggers(runtime, ready);
    },
    async stop() {
      // Every test is done: cut the test clients' idle keep-alive sockets, which would
      // otherwise hold the graceful close open.
      const closing = runtime.close();
      runtime.app.server.closeAllConnections();
      runtime.admin.server.closeAllConnections();
      await closing;
      await files.cleanup();
    },
  };
}
