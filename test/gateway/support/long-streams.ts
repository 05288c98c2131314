// Event streams over real HTTP against a workflow that runs for the whole test, for the
// stream-cap tests (test/gateway/stream-caps*.test.ts): a runtime listening on both
// listeners with the workflow `long` (one 8 s delay) and its triggers applied, and the
// streams a test opened, kept open until it closes them or the test ends.
import type { DevOptions } from '../../../roles/dev.ts';
import { startRuntime, type TestRuntime } from '../../support/gateway.ts';
import { trigger, workflow } from '../../support/manifests.ts';

/** The webhook path of the workflow `long` (namespace default, production). */
export const LONG_WORKFLOW_PATH = '/webhook/default_production_long';

export interface LongWorkflowRuntime {
  rt: TestRuntime;
  /** The webhook listener's base URL. */
  base: string;
  /** The admin listener's base URL. */
  admin: string;
}

/**
 * Starts a runtime with these budgets, listening on both listeners, and applies the
 * workflow `long` with one trigger per entry of `responseModes` (its name and path
 * segment the key, its response mode the value), waiting until they are Ready.
 */
export async function startLongWorkflowRuntime(
  budgets: DevOptions['budgets'],
  responseModes: Record<string, string>,
): Promise<LongWorkflowRuntime> {
  const rt = await startRuntime({ budgets });
  const base = await rt.app.listen({ port: 0, host: '127.0.0.1' });
  const admin = await rt.admin.listen({ port: 0, host: '127.0.0.1' });
  const names = Object.keys(responseModes);
  await rt.apply(
    'long.yaml',
    [
      // Running for the whole test: its streams stay open until the test closes them.
      workflow('long', { nodes: [{ id: 'wait', type: 'delay', duration: '8s' }] }),
      ...names.map((name) =>
        trigger(name, {
          workflowRef: { name: 'long' },
          pathSegment: name,
          response: { mode: responseModes[name] },
        }),
      ),
    ],
    names,
  );
  return { rt, base, admin };
}

/** A response to `OpenStreams.open`, which `close()` aborts (and forgets). */
export type OpenedStream = Response & { close(): void };

/** Every stream a test opened and has not closed yet. */
export class OpenStreams {
  readonly #open = new Set<AbortController>();

  /** How many streams are open. */
  get size(): number {
    return this.#open.size;
  }

  /** Opens a stream; kept open when it is answered 200 (a refusal is read by the test). */
  async open(url: string, init: RequestInit = {}): Promise<OpenedStream> {
    const controller = new AbortController();
    const res = await fetch(url, { ...init, signal: controller.signal });
    if (res.status === 200) this.#open.add(controller);
    return Object.assign(res, {
      close: () => {
        controller.abort();
        this.#open.delete(controller);
      },
    });
  }

  /** Closes the stream opened first of those still open. */
  closeOldest(): void {
    const [oldest] = this.#open;
    oldest?.abort();
    if (oldest) this.#open.delete(oldest);
  }

  /** Aborts every stream still open (for afterAll). */
  closeAll(): void {
    for (const controller of this.#open) controller.abort();
    this.#open.clear();
  }
}
