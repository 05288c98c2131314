// The directory source's uids: what identifies an object in a folder (API group, kind,
// namespace, name) decides its metadata.uid, so a restart, a manifest taken out and put
// back, or a file read empty for a moment (a slow writer, a git checkout) keeps it.
// Executions keep the uid of the trigger they came in on (ADR 0035, ADR 0018: amended
// 2026-11-28); a new uid would make every one of them look like a run of a re-created
// trigger: retries and replays refused, callbacks of triggers with secrets unsigned.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DirectorySource, directoryUid } from '../../operator/sources/directory.ts';
import type { ObjectRef } from '../../operator/sources/ports.ts';
import { manifestDir, secret, trigger, workflow } from '../support/manifests.ts';

type Dir = Awaited<ReturnType<typeof manifestDir>>;

/** RFC 9562: 8-4-4-4-12 lower-case hex, version 8 (custom), variant 10xx. */
const UUID_V8 = /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

const T = (name: string, namespace = 'default'): ObjectRef => ({
  kind: 'WebhookTrigger',
  namespace,
  name,
});
const W = (name: string, namespace = 'default'): ObjectRef => ({
  kind: 'Workflow',
  namespace,
  name,
});
const S = (name: string, namespace = 'default'): ObjectRef => ({ kind: 'Secret', namespace, name });

let dir: Dir;
const sources: DirectorySource[] = [];

async function open(): Promise<DirectorySource> {
  const source = new DirectorySource({ dir: dir.dir });
  sources.push(source);
  await source.start(() => {});
  return source;
}

beforeEach(async () => {
  dir = await manifestDir();
});
afterEach(async () => {
  await Promise.all(sources.splice(0).map((s) => s.stop()));
  await dir.cleanup();
});

describe('directory source uids', () => {
  it('are UUIDs (version 8), one per object: another kind or namespace of the same name is another uid', async () => {
    await dir.write(
      'all.yaml',
      workflow('orders'),
      trigger('orders', { workflowRef: { name: 'orders' } }),
      secret('orders', { a: 'x' }),
      workflow('orders', {}, { namespace: 'billing' }),
      trigger('orders', { workflowRef: { name: 'orders' } }, { namespace: 'billing' }),
    );
    const source = await open();
    const refs = [
      T('orders'),
      W('orders'),
      S('orders'),
      T('orders', 'billing'),
      W('orders', 'billing'),
    ];
    const uids = refs.map((ref) => source.get(ref)?.metadata.uid);
    for (const uid of uids) expect(uid).toMatch(UUID_V8);
    expect(new Set(uids).size).toBe(refs.length);
  });

  it('are the same in every process over the folder (a restart keeps them)', async () => {
    await dir.write('all.yaml', workflow('orders'), trigger('hook'), secret('keys', { a: 'x' }));
    const first = await open();
    const before = [T('hook'), W('orders'), S('keys')].map((r) => first.get(r)?.metadata.uid);
    await first.stop();
    const second = await open();
    const after = [T('hook'), W('orders'), S('keys')].map((r) => second.get(r)?.metadata.uid);
    expect(after).toEqual(before);
    expect(after.every((uid) => typeof uid === 'string' && UUID_V8.test(uid))).toBe(true);
  });

  it('an object removed and added back keeps its uid: its manifest taken out, or its file read empty for a moment', async () => {
    await dir.write('hook.yaml', workflow('orders'), trigger('hook'));
    const source = await open();
    const uid = source.get(T('hook'))?.metadata.uid;
    expect(uid).toMatch(UUID_V8);

    await dir.remove('hook.yaml');
    await source.reload();
    expect(source.get(T('hook'))).toBeUndefined();
    await dir.write('hook.yaml', workflow('orders'), trigger('hook'));
    await source.reload();
    expect(source.get(T('hook'))?.metadata.uid).toBe(uid);

    // A slow writer or a git checkout: the file is there, and empty, for one read.
    await dir.writeText('hook.yaml', '');
    await source.reload();
    expect(source.get(T('hook'))).toBeUndefined();
    await dir.write('hook.yaml', workflow('orders'), trigger('hook', { pathSegment: 'moved' }));
    await source.reload();
    expect(source.get(T('hook'))?.metadata.uid).toBe(uid);

    // Moved to another file: the same object.
    await dir.remove('hook.yaml');
    await dir.write('elsewhere.yaml', workflow('orders'), trigger('hook'));
    await source.reload();
    expect(source.get(T('hook'))?.metadata.uid).toBe(uid);
  });

  it('come from the API group, kind, namespace and name only (the derivation is fixed: executions keep them)', async () => {
    // Changing how they are derived gives every object of every folder another uid, and
    // every execution kept in Redis would be of a "re-created" trigger: do not.
    expect(directoryUid('hookgate.dev/v1alpha1', 'WebhookTrigger', 'default', 'hello')).toBe(
      directoryUid('hookgate.dev/v1', 'WebhookTrigger', 'default', 'hello'),
    );
    expect(directoryUid('hookgate.dev/v1alpha1', 'WebhookTrigger', 'default', 'hello')).toBe(
      '150f1d8b-0382-8dda-baa7-7883dab88fd0',
    );
    expect(directoryUid('v1', 'Secret', 'default', 'hello')).not.toBe(
      directoryUid('hookgate.dev/v1alpha1', 'WebhookTrigger', 'default', 'hello'),
    );
    await dir.write('hello.yaml', workflow('hello'), trigger('hello'), secret('hello', { a: 'x' }));
    const source = await open();
    expect(source.get(T('hello'))?.metadata.uid).toBe(
      directoryUid('hookgate.dev/v1alpha1', 'WebhookTrigger', 'default', 'hello'),
    );
    expect(source.get(W('hello'))?.metadata.uid).toBe(
      directoryUid('hookgate.dev/v1alpha1', 'Workflow', 'default', 'hello'),
    );
    expect(source.get(S('hello'))?.metadata.uid).toBe(
      directoryUid('v1', 'Secret', 'default', 'hello'),
    );
  });
});
