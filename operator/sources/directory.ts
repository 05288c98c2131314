// The embedded resource source: manifests read from a directory and watched.
//
// It stands in for the API server, so it admits manifests the way one would (the
// CRD schema, defaults and CEL rules via admitResource). A manifest that fails is
// reported with file, field path and reason and changes nothing: the last good
// version of each object keeps serving, and other files are unaffected.
//
// Secrets need no label here: unlike the Kubernetes source, which only watches Secrets
// labelled hookgate.dev/credentials=true because a cluster holds everyone's Secrets,
// every Secret in a manifest folder was put there for hookgate, and the folder is
// trusted as a whole. A label on them (as in examples/) is accepted and ignored.
//
// An object's uid is derived from what names it in the folder (directoryUid): every
// process over the folder, and every reload, gives it the same one.
import { metadataProblems } from '../../api/metadata-rules.ts';
import { createHash } from 'node:crypto';
import { watch, type FSWatcher } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { LineCounter, parseAllDocuments } from 'yaml';
import { documentValue, fieldOffset, yamlMessage } from '../../api/yaml-documents.ts';
import { isNamespaceName, isObjectName } from '../../api/identity.ts';
import { admitResource } from '../../api/validate.ts';
import { API_VERSION } from '../../api/v1alpha1/index.ts';
import type {
  AnyResource,
  ObjectRef,
  ResourceSource,
  SecretData,
  SourceKind,
  WatchedNamespaces,
} from './ports.ts';

/** One problem with one manifest document. */
export interface ManifestError {
  file: string;
  /** 0-based index of the YAML document in the file. */
  document: number;
  /**
   * 1-based line and column of the field (or of the nearest parent the document has),
   * as `hookgate validate` reports them; absent when the file could not be read.
   */
  line?: number;
  column?: number;
  /** `Kind namespace/name` when it could be read. */
  object?: string;
  field: string;
  message: string;
}

interface Entry {
  ref: ObjectRef;
  file: string;
  /** Where the object's name is: a second object of the same name is reported there. */
  at?: { document: number; line: number; column: number };
  resource: AnyResource;
  secret?: SecretData;
}

export interface DirectorySourceOptions {
  dir: string;
  /** Namespace for manifests without one. */
  defaultNamespace?: string;
  /** Wait this long after a file event before reloading (editors write in bursts). */
  debounceMs?: number;
  log?: (message: string, fields?: Record<string, unknown>) => void;
}

const key = (ref: ObjectRef) => `${ref.kind}/${ref.namespace}/${ref.name}`;

/**
 * The `metadata.uid` of an object read from a folder: the first 128 bits of the SHA-256
 * of `<API group>/<kind>/<namespace>/<name>` (the group without its version: `hookgate.dev`,
 * or empty for a core `v1` Secret), with the version (8) and variant bits of RFC 9562
 * set, as an RFC 9562 UUID string.
 *
 * A cluster gives each object a random uid at creation, and a new one when it is deleted
 * and created again. A folder cannot tell a manifest taken out and put back, read empty
 * for a moment (a slow writer, a git checkout) or read by a restarted process from a
 * re-creation, and a folder has one owner: so an object keeps its uid for as long as
 * its group, kind, namespace and name stay (executions keep their trigger's uid, and
 * one of another uid is a run of a re-created trigger: ADR 0035, ADR 0018). Changing
 * this derivation gives every object of every folder another uid.
 */
export function directoryUid(
  apiVersion: string,
  kind: string,
  namespace: string,
  name: string,
): string {
  const slash = apiVersion.lastIndexOf('/');
  const group = slash < 0 ? '' : apiVersion.slice(0, slash);
  const bytes = createHash('sha256')
    .update(`${group}/${kind}/${namespace}/${name}`, 'utf8')
    .digest()
    .subarray(0, 16);
  bytes[6] = (bytes[6]! & 0x0f) | 0x80; // version 8
  bytes[8] = (bytes[8]! & 0x3f) | 0x80; // variant 10
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export class DirectorySource implements ResourceSource {
  readonly #o: Required<DirectorySourceOptions>;
  #entries = new Map<string, Entry>();
  #errors: ManifestError[] = [];
  #watcher: FSWatcher | undefined;
  #timer: NodeJS.Timeout | undefined;
  #onChange: (ref: ObjectRef) => void = () => {};
  #reloading: Promise<void> = Promise.resolve();
  #order = 0;
  /** Objects named by a document that failed (admission), as of the last reload. */
  #failedRefs: ObjectRef[] = [];
  /** Files that could not be read or parsed at all, as of the last reload. */
  #failedFiles: string[] = [];

  constructor(options: DirectorySourceOptions) {
    this.#o = { defaultNamespace: 'default', debounceMs: 100, log: () => {}, ...options };
  }

  async start(onChange: (ref: ObjectRef) => void): Promise<void> {
    this.#onChange = onChange;
    await this.reload();
    this.#watcher = watch(this.#o.dir, { recursive: true }, () => this.#schedule());
    this.#watcher.on('error', (err) =>
      this.#o.log('manifest watch failed', { error: String(err) }),
    );
  }

  /** Current manifest problems, for the admin API and logs. */
  errors(): ManifestError[] {
    return structuredClone(this.#errors);
  }

  /** Re-read the whole directory and apply the difference (level-based). */
  reload(): Promise<void> {
    this.#reloading = this.#reloading.then(() => this.#reloadNow());
    return this.#reloading;
  }

  get(ref: ObjectRef): AnyResource | undefined {
    return this.#entries.get(key(ref))?.resource;
  }

  getSecret(namespace: string, name: string): SecretData | undefined {
    return this.#entries.get(key({ kind: 'Secret', namespace, name }))?.secret;
  }

  list(kind: Exclude<SourceKind, 'Secret'>): AnyResource[] {
    return [...this.#entries.values()].filter((e) => e.ref.kind === kind).map((e) => e.resource);
  }

  /** A folder may hold objects of any namespace (a manifest names it, else the default). */
  readonly namespaces: WatchedNamespaces = 'all';

  /**
   * The folder is the authority: its objects once a reload in progress is done, and the
   * ones a manifest names but that failed (an invalid document is still there: its
   * records are not orphans). A file that cannot be parsed at all may name anything:
   * an error, until it is fixed.
   */
  async listFresh(kind: Exclude<SourceKind, 'Secret'>): Promise<ObjectRef[]> {
    await this.#reloading;
    if (this.#failedFiles.length > 0) {
      throw new Error(
        `manifest files that cannot be read or parsed: ${this.#failedFiles.join(', ')}`,
      );
    }
    return [...[...this.#entries.values()].map((e) => e.ref), ...this.#failedRefs].filter(
      (ref) => ref.kind === kind,
    );
  }

  /** A folder's objects carry the uid their name derives (directoryUid), nothing else. */
  mayHaveWritten(ref: ObjectRef, uid: string): boolean {
    return uid === directoryUid(API_VERSION, ref.kind, ref.namespace, ref.name);
  }

  writeStatus(ref: ObjectRef, status: unknown): Promise<void> {
    const entry = this.#entries.get(key(ref));
    if (entry) entry.resource = { ...entry.resource, status: structuredClone(status) };
    return Promise.resolve();
  }

  // Objects read from files are gone the moment the file says so: nothing lingers,
  // so there is no finalizer to hold. Cleanup runs on the reconcile of a missing object.
  addFinalizer(): Promise<boolean> {
    return Promise.resolve(true);
  }

  removeFinalizer(): Promise<void> {
    return Promise.resolve();
  }

  async stop(): Promise<void> {
    this.#watcher?.close();
    if (this.#timer) clearTimeout(this.#timer);
    await this.#reloading;
  }

  #schedule(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.reload().catch((err: unknown) =>
        this.#o.log('manifest reload failed', { error: String(err) }),
      );
    }, this.#o.debounceMs);
  }

  async #reloadNow(): Promise<void> {
    const files = await listManifestFiles(this.#o.dir);
    const next = new Map<string, Entry>();
    const errors: ManifestError[] = [];
    const failedFiles = new Set<string>();
    const failedRefs: ObjectRef[] = [];
    for (const path of files) {
      const file = relative(this.#o.dir, path) || path;
      let text: string;
      try {
        text = await readFile(path, 'utf8');
      } catch (err) {
        // Removed between listing and reading: the next watch event settles it.
        errors.push({ file, document: 0, field: '', message: `cannot read file: ${String(err)}` });
        failedFiles.add(file);
        continue;
      }
      const parsed = this.#parseFile(file, text, errors);
      if (!parsed) failedFiles.add(file);
      for (const entry of parsed?.entries ?? []) {
        const k = key(entry.ref);
        const clash = next.get(k);
        if (clash) {
          errors.push({
            file,
            ...(entry.at ?? { document: 0 }),
            object: `${entry.ref.kind} ${entry.ref.namespace}/${entry.ref.name}`,
            field: 'metadata.name',
            message: `already defined in ${clash.file}`,
          });
          continue;
        }
        next.set(k, entry);
      }
      // A document that failed keeps its previous good version alive.
      for (const ref of parsed?.keepRefs ?? []) this.#keep(ref, next);
      failedRefs.push(...(parsed?.keepRefs ?? []));
    }
    // A file that cannot be parsed at all keeps every object it held before.
    for (const entry of this.#entries.values()) {
      if (failedFiles.has(entry.file) && !next.has(key(entry.ref))) next.set(key(entry.ref), entry);
    }
    this.#failedRefs = failedRefs;
    this.#failedFiles = [...failedFiles];
    this.#apply(next);
    this.#errors = errors;
    for (const e of errors) this.#o.log('manifest rejected', { ...e });
  }

  #keep(ref: ObjectRef, next: Map<string, Entry>): void {
    const previous = this.#entries.get(key(ref));
    if (previous && !next.has(key(ref))) next.set(key(ref), previous);
  }

  #parseFile(
    file: string,
    text: string,
    errors: ManifestError[],
  ): { entries: Entry[]; keepRefs: ObjectRef[] } | undefined {
    const lineCounter = new LineCounter();
    const docs = parseAllDocuments(text, { lineCounter });
    const list = Array.isArray(docs) ? docs : [docs];
    const entries: Entry[] = [];
    const keepRefs: ObjectRef[] = [];
    let fatal = false;
    list.forEach((doc, index) => {
      const at = (field: string) => {
        const pos = lineCounter.linePos(fieldOffset(doc, field));
        return { line: pos.line, column: pos.col };
      };
      if (doc.errors.length > 0) {
        const e = doc.errors[0]!;
        const line = e.linePos?.[0];
        errors.push({
          file,
          document: index,
          ...(line ? { line: line.line, column: line.col } : at('')),
          field: '',
          message: `YAML syntax error${line ? ` at line ${line.line}, column ${line.col}` : ''}: ${yamlMessage(e.message)}`,
        });
        fatal = true;
        return;
      }
      const read = documentValue(doc);
      if ('error' in read) {
        errors.push({
          file,
          document: index,
          ...at(''),
          field: '',
          message: `YAML error: ${read.error}`,
        });
        fatal = true;
        return;
      }
      const value = read.value;
      if (value === null || value === undefined) return;
      const result = this.#admit(file, index, value);
      if ('error' in result) {
        // The position after the document index, as ManifestError lists its fields.
        errors.push(
          ...result.error.map(({ file: f, document, ...rest }) => ({
            file: f,
            document,
            ...at(rest.field),
            ...rest,
          })),
        );
        if (result.ref) keepRefs.push(result.ref);
      } else entries.push({ ...result.entry, at: { document: index, ...at('metadata.name') } });
    });
    return fatal ? undefined : { entries, keepRefs };
  }

  #admit(
    file: string,
    document: number,
    value: unknown,
  ): { entry: Entry } | { error: ManifestError[]; ref?: ObjectRef } {
    const obj = (typeof value === 'object' && value !== null ? value : {}) as Record<
      string,
      unknown
    >;
    const meta = (
      typeof obj.metadata === 'object' && obj.metadata !== null ? obj.metadata : {}
    ) as Record<string, unknown>;
    const name = typeof meta.name === 'string' ? meta.name : undefined;
    const namespace =
      typeof meta.namespace === 'string' ? meta.namespace : this.#o.defaultNamespace;
    const kind = obj.kind;
    const fail = (field: string, message: string, ref?: ObjectRef) => ({
      error: [
        {
          file,
          document,
          ...(ref ? { object: `${ref.kind} ${ref.namespace}/${ref.name}` } : {}),
          field,
          message,
        },
      ],
      ...(ref ? { ref } : {}),
    });
    if (!name || !isObjectName(name)) {
      return fail(
        'metadata.name',
        'Required value: a DNS subdomain name (lower case letters, digits, - and ., at most 253)',
      );
    }
    if (!isNamespaceName(namespace)) {
      return fail(
        'metadata.namespace',
        `Invalid value: "${namespace}": a DNS label (lower case letters, digits and -, at most 63)`,
      );
    }
    const ref: ObjectRef | undefined =
      kind === 'Workflow' || kind === 'WebhookTrigger' ? { kind, namespace, name } : undefined;
    // Labels and annotations a cluster would refuse (hookgate kinds: admitResource).
    const metaProblems = kind === 'Secret' ? metadataProblems(meta) : [];
    if (metaProblems.length > 0) {
      return {
        error: metaProblems.map((p) => ({
          file,
          document,
          ...(ref ? { object: `${ref.kind} ${namespace}/${name}` } : {}),
          field: p.field,
          message: p.message,
        })),
        ...(ref ? { ref } : {}),
      };
    }
    if (kind === 'Secret' && obj.apiVersion === 'v1')
      return this.#admitSecret(file, document, obj, namespace, name);
    const admitted = admitResource(value);
    if (!admitted.ok) {
      return {
        error: admitted.errors.map((e) => ({
          file,
          document,
          ...(ref ? { object: `${ref.kind} ${namespace}/${name}` } : {}),
          field: e.field,
          message: e.message,
        })),
        ...(ref ? { ref } : {}),
      };
    }
    const resource = this.#withMetadata(ref as ObjectRef, admitted.object);
    return { entry: { ref: ref as ObjectRef, file, resource } };
  }

  #admitSecret(
    file: string,
    document: number,
    obj: Record<string, unknown>,
    namespace: string,
    name: string,
  ): { entry: Entry } | { error: ManifestError[]; ref?: ObjectRef } {
    const ref: ObjectRef = { kind: 'Secret', namespace, name };
    const data: Record<string, string> = {};
    const object = `Secret ${namespace}/${name}`;
    for (const [field, encoded] of [
      ['data', true],
      ['stringData', false],
    ] as const) {
      const section = obj[field];
      if (section === undefined || section === null) continue;
      if (typeof section !== 'object' || Array.isArray(section)) {
        return {
          error: [{ file, document, object, field, message: 'must be a map of strings' }],
          ref,
        };
      }
      for (const [k, v] of Object.entries(section)) {
        if (typeof v !== 'string') {
          return {
            error: [
              { file, document, object, field: `${field}.${k}`, message: 'must be a string' },
            ],
            ref,
          };
        }
        if (encoded && !/^[A-Za-z0-9+/]*={0,2}$/.test(v)) {
          return {
            error: [{ file, document, object, field: `${field}.${k}`, message: 'must be base64' }],
            ref,
          };
        }
        data[k] = encoded ? Buffer.from(v, 'base64').toString('utf8') : v;
      }
    }
    const resource = this.#withMetadata(ref, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: obj.metadata,
    });
    return { entry: { ref, file, resource, secret: { namespace, name, data } } };
  }

  /**
   * Server-set metadata: uid (directoryUid), creation time, generation (bumped when the
   * spec changes).
   */
  #withMetadata(ref: ObjectRef, object: Record<string, unknown>): AnyResource {
    const previous = this.#entries.get(key(ref))?.resource;
    const meta = {
      ...(object.metadata as Record<string, unknown>),
      namespace: ref.namespace,
      name: ref.name,
    };
    const sameSpec = previous && isDeepStrictEqual(previous.spec, object.spec);
    const generation = previous ? (previous.metadata.generation ?? 1) + (sameSpec ? 0 : 1) : 1;
    return {
      ...object,
      metadata: {
        ...meta,
        name: ref.name,
        namespace: ref.namespace,
        uid: directoryUid(String(object.apiVersion), ref.kind, ref.namespace, ref.name),
        generation,
        // Creation order decides path conflicts: keep the first-seen time, and make
        // objects loaded together distinct and ordered by load order.
        creationTimestamp: previous?.metadata.creationTimestamp ?? this.#creationTime(),
      },
      ...(previous?.status !== undefined ? { status: previous.status } : {}),
    } as AnyResource;
  }

  #creationTime(): string {
    const t = new Date(Date.now() + this.#order++);
    return t.toISOString();
  }

  #apply(next: Map<string, Entry>): void {
    const changed: ObjectRef[] = [];
    for (const [k, entry] of next) {
      const old = this.#entries.get(k);
      if (!old) changed.push(entry.ref);
      else if (!sameContent(old, entry)) changed.push(entry.ref);
    }
    for (const [k, entry] of this.#entries) if (!next.has(k)) changed.push(entry.ref);
    this.#entries = next;
    for (const ref of changed) this.#onChange(ref);
  }
}

function sameContent(a: Entry, b: Entry): boolean {
  const strip = (e: Entry) => ({ r: { ...e.resource, status: undefined }, s: e.secret });
  return isDeepStrictEqual(strip(a), strip(b));
}

async function listManifestFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  for (const e of entries) {
    if (!e.isFile() || !/\.(ya?ml|json)$/.test(e.name) || e.name.startsWith('.')) continue;
    out.push(join(e.parentPath, e.name));
  }
  return out.sort();
}
