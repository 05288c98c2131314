// REST semantics of one resource: get, list, create, update (PUT), patch, delete,
// and the status subresource — K1-K10, K22-K24, K26.
import { parse as parseYaml } from 'yaml';
import {
  admitObject,
  checkName,
  crdStatus,
  normaliseBuiltin,
  specPart,
  withType,
  type FieldValidation,
} from './admission.ts';
import { fromStorage } from './codec.ts';
import { finalizerWarnings } from './object-meta.ts';
import { applyMerge, canonical, jsonPatch, mergePatch } from './patch.ts';
import {
  apiVersionOf,
  CRD_TYPE,
  storageKey,
  type CrdSpec,
  type KubeObject,
  type Registry,
  type ResourceType,
} from './resources.ts';
import {
  alreadyExists,
  ApiError,
  badRequest,
  conflict,
  invalid,
  notFound,
  unsupportedMediaType,
} from './status.ts';
import type { Storage } from './storage.ts';

export interface Ctx {
  storage: Storage;
  registry: Registry;
}

export interface Target {
  rt: ResourceType;
  namespace?: string;
  name?: string;
  subresource?: string;
}

export interface WriteOptions {
  fieldValidation: FieldValidation;
  fieldManager?: string;
  force?: boolean;
  /** `dryRun=All`: run every check, store nothing, send no event. */
  dryRun?: boolean;
  /**
   * For a PATCH: authorise the `create` a server-side apply of a missing object turns
   * into (throws 403). The API server wraps the create validation of a patch in this
   * check (handlers/patch.go createAuthorizerAttributes, update.go withAuthorization).
   */
  authorizeCreate?: () => void;
}

export interface Outcome {
  code: number;
  body: KubeObject;
  warnings: string[];
}

const NAMESPACES = { group: '', plural: 'namespaces' };
export const PATCH_TYPES = [
  'application/json-patch+json',
  'application/merge-patch+json',
  'application/apply-patch+yaml',
];

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function now(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, 'Z');
}

function randomSuffix(): string {
  const alphabet = 'bcdfghjklmnpqrstvwxz2456789';
  return Array.from(
    { length: 5 },
    () => alphabet[Math.floor(Math.random() * alphabet.length)],
  ).join('');
}

export function getObject(ctx: Ctx, t: Target): KubeObject {
  const obj = read(ctx, t);
  if (!obj) throw notFound(t.rt, t.name ?? '');
  return withType(obj, t.rt);
}

/** The named object as storage decodes it (codec.ts), or undefined. */
function read(ctx: Ctx, t: Target): KubeObject | undefined {
  const stored = ctx.storage.get(storageKey(t.rt), t.namespace, t.name ?? '');
  return stored && fromStorage(t.rt, stored);
}

function asObject(body: unknown): KubeObject {
  if (!isObject(body)) throw badRequest('the body of the request is not a JSON object');
  const metadata = isObject(body.metadata) ? body.metadata : {};
  // Decoding into ObjectMeta: its string fields take strings only (a number is not
  // coerced), as encoding/json refuses them.
  for (const field of ['name', 'generateName', 'namespace'] as const) {
    const value = metadata[field];
    if (value !== undefined && value !== null && typeof value !== 'string') {
      throw badRequest(
        `json: cannot unmarshal ${Array.isArray(value) ? 'array' : typeof value} into Go struct field ObjectMeta.metadata.${field} of type string`,
      );
    }
  }
  return { ...body, metadata };
}

function checkNamespace(ctx: Ctx, t: Target): void {
  if (t.rt.namespaced && t.namespace && !ctx.storage.get('/namespaces', undefined, t.namespace)) {
    throw notFound(NAMESPACES, t.namespace);
  }
}

/**
 * The body's apiVersion, when it has one, must be the resource's (handlers/create.go,
 * update.go: `scope.AcceptsGroupVersion`); a missing one defaults to the URL's.
 */
function checkApiVersion(t: Target, input: KubeObject): void {
  const expected = apiVersionOf(t.rt);
  if (input.apiVersion !== undefined && input.apiVersion !== expected) {
    throw badRequest(
      `the API version in the data (${typeof input.apiVersion === 'string' ? input.apiVersion : JSON.stringify(input.apiVersion)}) does not match the expected API version (${expected})`,
    );
  }
}

// ---------------------------------------------------------------- create

export function createObject(ctx: Ctx, t: Target, body: unknown, opts: WriteOptions): Outcome {
  const input = asObject(body);
  const meta = input.metadata;
  if (input.kind !== undefined && input.kind !== t.rt.kind) {
    throw badRequest(
      `the API version in the data (${JSON.stringify(input.apiVersion)}) and kind (${JSON.stringify(input.kind)}) do not match the resource (${t.rt.kind})`,
    );
  }
  checkApiVersion(t, input);
  if (meta.resourceVersion) {
    // etcd3 store.Create: storage.ErrResourceVersionSetOnCreate, answered as a 500.
    throw new ApiError({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: 'resourceVersion should not be set on objects to be created',
      code: 500,
    });
  }
  if (t.rt.namespaced) {
    if (meta.namespace && meta.namespace !== t.namespace) {
      throw badRequest(
        'the namespace of the provided object does not match the namespace sent on the request',
      );
    }
    meta.namespace = t.namespace;
  } else delete meta.namespace;
  if (!meta.name && meta.generateName) meta.name = `${meta.generateName}${randomSuffix()}`;
  if (!meta.name) {
    throw invalid(t.rt, '', [
      {
        field: 'metadata.name',
        reason: 'FieldValueRequired',
        message: 'Required value: name or generateName is required',
      },
    ]);
  }
  checkName(t.rt, meta.name);
  checkNamespace(ctx, t);
  const key = storageKey(t.rt);
  if (ctx.storage.get(key, t.namespace, meta.name)) throw alreadyExists(t.rt, meta.name);
  if (t.rt.statusSubresource) delete input.status;
  const { object, warnings } = admitObject(t.rt, input, opts.fieldValidation);
  // The custom resource strategy's WarningsOnCreate, after validation has passed.
  if (t.rt.custom) warnings.push(...finalizerWarnings(object.metadata));
  opts.authorizeCreate?.();
  normaliseBuiltin(t.rt, object);
  const m = object.metadata;
  delete m.deletionTimestamp;
  delete m.deletionGracePeriodSeconds;
  m.uid = crypto.randomUUID();
  m.creationTimestamp = now();
  if (t.rt.generation) m.generation = 1;
  else delete m.generation;
  if (t.rt === CRD_TYPE) object.status = crdStatus(object, m.creationTimestamp);
  if (opts.dryRun) return { code: 201, body: withType(object, t.rt), warnings };
  const stored = ctx.storage.write(key, object, 'ADDED');
  afterWrite(ctx, t.rt, stored);
  return { code: 201, body: withType(stored, t.rt), warnings };
}

// ---------------------------------------------------------------- update

interface UpdateMode {
  /**
   * A PUT (not the tail of a PATCH): a custom resource needs the RV (K3), and a uid in
   * the body is a precondition (rest/update.go defaultUpdatedObjectInfo.Preconditions;
   * a patch's updated-object info has none).
   */
  put: boolean;
}

/**
 * handlers/rest.go checkName: the body must name the object of the URL (a PUT, and
 * what a patch produced).
 */
function checkUrlName(input: KubeObject, name: string): void {
  const objName = input.metadata.name;
  if (!objName) {
    throw badRequest(
      `the name of the object (${name} based on URL) was undeterminable: name must be provided`,
    );
  }
  if (objName !== name) {
    throw badRequest(
      `the name of the object (${objName}) does not match the name on the URL (${name})`,
    );
  }
}

/**
 * A PUT's uid precondition fails as etcd3's GuaranteedUpdate reports it
 * (storage.Preconditions.Check → StorageError invalid object, Code 4, turned into a
 * Conflict by InterpretUpdateError), with the object's etcd key.
 */
function checkUidPrecondition(t: Target, input: KubeObject, cur: KubeObject): void {
  const uid = input.metadata.uid;
  if (!uid || uid === cur.metadata.uid) return;
  const prefix = t.rt.custom || t.rt === CRD_TYPE ? `${t.rt.group}/${t.rt.plural}` : t.rt.plural;
  const key = `/registry/${prefix}/${t.namespace ? `${t.namespace}/` : ''}${t.name ?? ''}`;
  throw conflict(
    t.rt,
    t.name ?? '',
    `StorageError: invalid object, Code: 4, Key: ${key}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: ${uid}, UID in object meta: ${cur.metadata.uid ?? ''}`,
  );
}

/** PUT and the tail of PATCH: preconditions, subresource rules, generation, no-op. */
export function updateObject(
  ctx: Ctx,
  t: Target,
  body: unknown,
  opts: WriteOptions,
  mode: UpdateMode = { put: true },
): Outcome {
  const input = asObject(body);
  checkApiVersion(t, input);
  const name = t.name ?? '';
  checkUrlName(input, name);
  if (t.rt.namespaced && input.metadata.namespace && input.metadata.namespace !== t.namespace) {
    throw badRequest(
      'the namespace of the provided object does not match the namespace sent on the request',
    );
  }
  const stored = ctx.storage.get(storageKey(t.rt), t.namespace, name);
  if (!stored) throw notFound(t.rt, name);
  const cur = fromStorage(t.rt, stored);
  if (mode.put) checkUidPrecondition(t, input, cur);
  const rv = input.metadata.resourceVersion;
  if (!rv && mode.put && t.rt.custom) {
    // registry/generic/registry/store.go Update: a custom resource allows no unconditional
    // update, and this one error is built with
    // `schema.GroupKind{Group: qualifiedResource.Group, Kind: qualifiedResource.Resource}`
    // ("TODO: The Invalid error should have a field for Resource … See the discussion in
    // #18526"), so it reads `webhooktriggers.hookgate.dev "x" is invalid: …` with
    // details.kind the plural, unlike every other 422 (rest.BeforeCreate/BeforeUpdate use
    // the Kind). The bad value is the uint64 0, which field.Error.ErrorBody prints as JSON
    // since apimachinery v0.34 (`0`; older servers printed %#v, `0x0`).
    throw invalid({ group: t.rt.group, kind: t.rt.plural }, name, [
      {
        field: 'metadata.resourceVersion',
        reason: 'FieldValueInvalid',
        message: 'Invalid value: 0: must be specified for an update',
      },
    ]);
  }
  if (rv && rv !== cur.metadata.resourceVersion) throw conflict(t.rt, name);
  const next = prepareUpdate(t, input, cur);
  checkUidUnchanged(t.rt, next, cur);
  checkDeletionUnchanged(t.rt, next, cur);
  const { object, warnings } = admitObject(t.rt, next, opts.fieldValidation, cur);
  normaliseBuiltin(t.rt, object);
  checkFinalizers(t.rt, object, cur);
  // WarningsOnUpdate: the main resource's strategy warns about finalizers it adds; the
  // status strategy warns about nothing.
  if (t.rt.custom && t.subresource !== 'status') {
    warnings.push(...finalizerWarnings(object.metadata, cur.metadata));
  }
  return commit(ctx, t, object, { cur, stored }, warnings, opts.dryRun === true);
}

/** Copy what a request cannot change from the stored object (K8 status rules). */
function prepareUpdate(t: Target, input: KubeObject, cur: KubeObject): KubeObject {
  let next: KubeObject;
  if (t.subresource === 'status') {
    // Only .status is taken from the request; metadata and spec edits are dropped.
    next = structuredClone(cur);
    if (input.status !== undefined) next.status = input.status;
    else delete next.status;
    return next;
  }
  next = structuredClone(input);
  if (t.rt.statusSubresource) {
    if (cur.status !== undefined) next.status = structuredClone(cur.status);
    else delete next.status;
  }
  const m = next.metadata;
  const c = cur.metadata;
  m.name = c.name;
  if (t.rt.namespaced) m.namespace = c.namespace;
  if (!m.uid) m.uid = c.uid; // rest.BeforeUpdate keeps the stored uid when none is given
  m.creationTimestamp = c.creationTimestamp;
  m.resourceVersion = c.resourceVersion;
  if (c.generation !== undefined) m.generation = c.generation;
  else delete m.generation;
  // rest.BeforeUpdate: "an update can never remove/change a deletion timestamp" (the
  // stored one is put back) nor remove the grace period (put back when the request has
  // none). What is left — a timestamp on a live object, another grace period — is
  // refused as immutable by ValidateObjectMetaAccessorUpdate (checkDeletionUnchanged).
  if (m.deletionTimestamp === null) delete m.deletionTimestamp;
  if (m.deletionGracePeriodSeconds === null) delete m.deletionGracePeriodSeconds;
  if (c.deletionTimestamp) m.deletionTimestamp = c.deletionTimestamp;
  if (m.deletionGracePeriodSeconds === undefined && c.deletionGracePeriodSeconds !== undefined)
    m.deletionGracePeriodSeconds = c.deletionGracePeriodSeconds;
  return next;
}

/**
 * metav1.Time as the accessor reads it (time.Parse RFC3339; unparsable → none) and as
 * it marshals (RFC3339 in UTC, whole seconds).
 */
function metaTime(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  const m = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.exec(value);
  const ms = m ? Date.parse(value) : NaN;
  return Number.isNaN(ms) ? undefined : new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/**
 * ValidateObjectMetaAccessorUpdate (apimachinery pkg/api/validation/objectmeta.go):
 * deletionTimestamp and deletionGracePeriodSeconds are immutable fields, compared with
 * Semantic.DeepEqual after rest.BeforeUpdate restored what it restores (prepareUpdate),
 * so setting either on a live object, or changing the grace period of one being
 * deleted, is 422 `field is immutable` with the new value as JSON.
 */
function checkDeletionUnchanged(rt: ResourceType, next: KubeObject, cur: KubeObject): void {
  const m = next.metadata;
  const c = cur.metadata;
  const causes: { field: string; reason: string; message: string }[] = [];
  const ts = metaTime(m.deletionTimestamp);
  if (ts === undefined) delete m.deletionTimestamp; // the CR decoder drops bad metadata
  if (ts !== undefined && ts !== metaTime(c.deletionTimestamp)) {
    causes.push({
      field: 'metadata.deletionTimestamp',
      reason: 'FieldValueInvalid',
      message: `Invalid value: ${JSON.stringify(ts)}: field is immutable`,
    });
  }
  if (m.deletionGracePeriodSeconds !== c.deletionGracePeriodSeconds) {
    causes.push({
      field: 'metadata.deletionGracePeriodSeconds',
      reason: 'FieldValueInvalid',
      message: `Invalid value: ${JSON.stringify(m.deletionGracePeriodSeconds ?? null)}: field is immutable`,
    });
  }
  if (causes.length > 0) throw invalid(rt, cur.metadata.name ?? '', causes);
}

/** ValidateObjectMetaAccessorUpdate: the uid is immutable (a patch may try to change it). */
function checkUidUnchanged(rt: ResourceType, next: KubeObject, cur: KubeObject): void {
  const uid = next.metadata.uid;
  if (uid === cur.metadata.uid) return;
  throw invalid(rt, cur.metadata.name ?? '', [
    {
      field: 'metadata.uid',
      reason: 'FieldValueInvalid',
      message: `Invalid value: ${JSON.stringify(uid)}: field is immutable`,
    },
  ]);
}

/** K10: once deletion started, no new finalizers. */
function checkFinalizers(rt: ResourceType, next: KubeObject, cur: KubeObject): void {
  if (!cur.metadata.deletionTimestamp) return;
  const old = new Set(cur.metadata.finalizers ?? []);
  const added = (next.metadata.finalizers ?? []).filter((f) => !old.has(f));
  if (added.length > 0) {
    throw invalid(rt, cur.metadata.name ?? '', [
      {
        field: 'metadata.finalizers',
        reason: 'FieldValueForbidden',
        message: `Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{${added.map((f) => `"${f}"`).join(', ')}}`,
      },
    ]);
  }
}

/**
 * Generation, no-op detection (K5), deletion once the last finalizer is gone (K10).
 * `cur` is the current object as decoded (defaults applied), `stored` as stored:
 * generation compares the spec with the decoded object (the strategy sees that), while
 * a write is skipped only when it would store the same bytes (etcd3 store.go
 * GuaranteedUpdate: `bytes.Equal(data, origState.data)`, re-read from etcd), so an
 * update that only adds a new default is stored.
 */
function commit(
  ctx: Ctx,
  t: Target,
  next: KubeObject,
  { cur, stored }: { cur: KubeObject; stored: KubeObject },
  warnings: string[],
  dryRun: boolean,
): Outcome {
  const key = storageKey(t.rt);
  if (
    t.rt.generation &&
    specPart(next, t.rt.statusSubresource) !== specPart(cur, t.rt.statusSubresource)
  ) {
    next.metadata.generation = (cur.metadata.generation ?? 0) + 1;
  }
  if (t.rt === CRD_TYPE && t.subresource !== 'status') {
    next.status = crdStatus(next, cur.metadata.creationTimestamp ?? now());
  }
  if (canonical(next) === canonical(withType(stored, t.rt))) {
    return { code: 200, body: withType(cur, t.rt), warnings };
  }
  if (dryRun) return { code: 200, body: withType(next, t.rt), warnings };
  if (next.metadata.deletionTimestamp && (next.metadata.finalizers ?? []).length === 0) {
    const gone = ctx.storage.remove(key, next);
    afterDelete(ctx, t.rt, gone);
    return { code: 200, body: withType(fromStorage(t.rt, gone), t.rt), warnings };
  }
  const written = ctx.storage.write(key, next, 'MODIFIED');
  afterWrite(ctx, t.rt, written);
  return { code: 200, body: withType(written, t.rt), warnings };
}

// ---------------------------------------------------------------- patch

function parseJson(raw: string): unknown {
  try {
    return JSON.parse(raw) as unknown;
  } catch (err) {
    throw badRequest(`error decoding patch: ${(err as Error).message}`);
  }
}

/** K22-K24: json-patch, merge-patch, apply-patch+yaml; 415 for anything else on CRs. */
export function patchObject(
  ctx: Ctx,
  t: Target,
  contentType: string,
  raw: string,
  opts: WriteOptions,
): Outcome {
  let type = contentType.split(';')[0]?.trim() ?? '';
  if (type === 'application/strategic-merge-patch+json' && !t.rt.custom) {
    type = 'application/merge-patch+json'; // built-ins: treated as a merge patch (simplified)
  }
  if (!PATCH_TYPES.includes(type)) throw unsupportedMediaType(type, PATCH_TYPES);
  if (type === 'application/apply-patch+yaml') return applyPatch(ctx, t, raw, opts);
  const cur = read(ctx, t);
  if (!cur) throw notFound(t.rt, t.name ?? '');
  const body = parseJson(raw);
  if (type === 'application/merge-patch+json' && !isObject(body)) {
    throw badRequest('error decoding patch: merge patch must be a JSON object');
  }
  const patched =
    type === 'application/json-patch+json'
      ? jsonPatch(withType(cur, t.rt), body)
      : mergePatch(withType(cur, t.rt), body);
  return updateObject(ctx, t, patched, opts, { put: false });
}

function applyPatch(ctx: Ctx, t: Target, raw: string, opts: WriteOptions): Outcome {
  if (!opts.fieldManager) {
    throw badRequest('PATCH, application/apply-patch+yaml requires fieldManager to be set');
  }
  let applied: unknown;
  try {
    applied = parseYaml(raw) as unknown;
  } catch (err) {
    throw badRequest(`error decoding YAML: ${(err as Error).message}`);
  }
  const input = asObject(applied);
  if (input.metadata.name && input.metadata.name !== t.name) {
    throw badRequest(
      `the name of the object (${input.metadata.name}) does not match the name on the URL (${t.name ?? ''})`,
    );
  }
  const cur = read(ctx, t);
  if (!cur) {
    if (t.subresource) throw notFound(t.rt, t.name ?? '');
    if (input.metadata.uid) {
      // handlers/patch.go applyPatch: a uid names an object that must exist.
      throw conflict(
        t.rt,
        t.name ?? '',
        `uid mismatch: the provided object specified uid ${String(input.metadata.uid)}, and no existing object was found`,
      );
    }
    return createObject(ctx, t, { ...input, metadata: { ...input.metadata, name: t.name } }, opts);
  }
  const merged = applyMerge(withType(cur, t.rt), input, t.rt.schema);
  return updateObject(ctx, t, merged, opts, { put: false });
}

// ---------------------------------------------------------------- delete

export interface DeleteOptions {
  propagationPolicy?: string;
  orphanDependents?: boolean;
  preconditions?: { uid?: string; resourceVersion?: string };
  dryRun?: string[];
}

/**
 * DeleteOptions.preconditions: uid and resourceVersion must match, or 409. rest.BeforeDelete
 * checks them first and words the conflict with the kind as its GroupResource
 * (`WebhookTrigger.hookgate.dev "x"`, details.kind `WebhookTrigger`).
 */
function checkPreconditions(
  t: Target,
  cur: KubeObject,
  pre: { uid?: string; resourceVersion?: string },
): void {
  const name = t.name ?? '';
  const gr = { group: t.rt.group, plural: t.rt.kind };
  if (pre.uid && pre.uid !== cur.metadata.uid) {
    throw conflict(
      gr,
      name,
      `the UID in the precondition (${pre.uid}) does not match the UID in record (${cur.metadata.uid ?? ''}). The object might have been deleted and then recreated`,
    );
  }
  if (pre.resourceVersion && pre.resourceVersion !== cur.metadata.resourceVersion) {
    throw conflict(
      gr,
      name,
      `the ResourceVersion in the precondition (${pre.resourceVersion}) does not match the ResourceVersion in record (${cur.metadata.resourceVersion ?? ''}). The object might have been modified`,
    );
  }
}

/** K10, K26: finalizers hold the object with a deletionTimestamp; others delete now. */
export function deleteObject(ctx: Ctx, t: Target, options: DeleteOptions): Outcome {
  const policy = options.propagationPolicy;
  if (policy === 'Foreground' || policy === 'Orphan' || options.orphanDependents === true) {
    throw badRequest(
      `propagationPolicy ${policy ?? 'Orphan'} is not supported by this test API server (no garbage collector): use Background`,
    );
  }
  const key = storageKey(t.rt);
  const name = t.name ?? '';
  const cur = read(ctx, t);
  if (!cur) throw notFound(t.rt, name);
  checkPreconditions(t, cur, options.preconditions ?? {});
  if (options.dryRun?.includes('All'))
    return { code: 200, body: withType(cur, t.rt), warnings: [] };
  if ((cur.metadata.finalizers ?? []).length > 0) {
    if (cur.metadata.deletionTimestamp)
      return { code: 200, body: withType(cur, t.rt), warnings: [] };
    const next = structuredClone(cur);
    next.metadata.deletionTimestamp = now();
    next.metadata.deletionGracePeriodSeconds = 0;
    if (t.rt.generation) next.metadata.generation = (cur.metadata.generation ?? 0) + 1;
    const stored = ctx.storage.write(key, next, 'MODIFIED');
    return { code: 200, body: withType(stored, t.rt), warnings: [] };
  }
  const gone = ctx.storage.remove(key, cur);
  afterDelete(ctx, t.rt, gone);
  return { code: 200, body: withType(fromStorage(t.rt, gone), t.rt), warnings: [] };
}

// ---------------------------------------------------------------- side effects

/** Creating or changing a CRD updates the served types (and so discovery, K28). */
function afterWrite(ctx: Ctx, rt: ResourceType, obj: KubeObject): void {
  if (rt === CRD_TYPE) ctx.registry.setCrd(obj.metadata.name ?? '', obj.spec as CrdSpec);
}

/** Deleting a CRD deletes its objects; deleting a namespace deletes its contents. */
function afterDelete(ctx: Ctx, rt: ResourceType, obj: KubeObject): void {
  if (rt === CRD_TYPE) {
    const spec = obj.spec as CrdSpec;
    const key = storageKey({ group: spec.group, plural: spec.names.plural });
    for (const o of ctx.storage.list(key)) ctx.storage.remove(key, o);
    ctx.registry.setCrd(obj.metadata.name ?? '', undefined);
  }
  if (rt.group === '' && rt.plural === 'namespaces') {
    for (const type of ctx.registry.all().filter((r) => r.namespaced)) {
      const key = storageKey(type);
      for (const o of ctx.storage.list(key, obj.metadata.name)) ctx.storage.remove(key, o);
    }
  }
}
