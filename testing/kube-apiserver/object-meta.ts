// ObjectMeta rules every object passes on create and update, as apimachinery's
// ValidateObjectMeta checks them: label keys and values (metav1validation.ValidateLabels),
// annotation keys and their total size (ValidateAnnotations), owner references
// (ValidateOwnerReferences) and finalizer names (ValidateFinalizers), in that order
// (pkg/api/validation/objectmeta.go validateObjectMetaAccessorWithOptsCommon). Messages are the
// API server's own as of Kubernetes 1.35, where k8s.io/apimachinery/pkg/util/validation's
// IsQualifiedName and IsValidLabelValue became aliases of pkg/api/validate/content's
// IsLabelKey and IsLabelValue ("a valid label key …", lengths "no more than N bytes"),
// so a client that matches on them sees what a real cluster would send. selectors.ts
// uses the same two checks, as labels.Parse does.

export interface MetaCause {
  field: string;
  reason: string;
  message: string;
}

const NAME_CHARS = '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]';
const QUALIFIED_NAME_PART = new RegExp(`^${NAME_CHARS}$`);
const LABEL_VALUE = new RegExp(`^(${NAME_CHARS})?$`);
const DNS1123_SUBDOMAIN_FMT = '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*';
const DNS1123_SUBDOMAIN = new RegExp(`^${DNS1123_SUBDOMAIN_FMT}$`);
const TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024;

/** validation.RegexError: the message, examples and the pattern. */
function regexError(message: string, pattern: string, ...examples: string[]): string {
  const shown = examples.map((e) => `'${e}', `).join(' or ');
  return `${message} (e.g. ${shown}regex used for validation is '${pattern}')`;
}

const QUALIFIED_NAME_MSG =
  "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_MSG =
  "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const SUBDOMAIN_MSG =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

/** content.MaxLenError: Go's len(), so bytes. */
const tooLong = (value: string, max: number): boolean => Buffer.byteLength(value) > max;

/** validation.IsQualifiedName (v0.35: content.IsLabelKey): `[prefix/]name`, prefix a DNS subdomain. */
export function qualifiedNameErrors(value: string): string[] {
  const parts = value.split('/');
  let name: string;
  const errors: string[] = [];
  if (parts.length === 1) {
    name = parts[0] as string;
  } else if (parts.length === 2) {
    const prefix = parts[0] as string;
    name = parts[1] as string;
    if (prefix.length === 0) errors.push('prefix part must be non-empty');
    else {
      if (tooLong(prefix, 253)) errors.push('prefix part must be no more than 253 bytes');
      if (!DNS1123_SUBDOMAIN.test(prefix))
        errors.push(
          `prefix part ${regexError(SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, 'example.com')}`,
        );
    }
  } else {
    return [
      `a valid label key ${regexError(QUALIFIED_NAME_MSG, NAME_CHARS, 'MyName', 'my.name', '123-abc')}` +
        " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
    ];
  }
  if (name.length === 0) errors.push('name part must be non-empty');
  else if (tooLong(name, 63)) errors.push('name part must be no more than 63 bytes');
  if (!QUALIFIED_NAME_PART.test(name))
    errors.push(
      `name part ${regexError(QUALIFIED_NAME_MSG, NAME_CHARS, 'MyName', 'my.name', '123-abc')}`,
    );
  return errors;
}

/** validation.IsValidLabelValue (v0.35: content.IsLabelValue). */
export function labelValueErrors(value: string): string[] {
  const errors: string[] = [];
  if (tooLong(value, 63)) errors.push('must be no more than 63 bytes');
  if (!LABEL_VALUE.test(value))
    errors.push(regexError(LABEL_VALUE_MSG, `(${NAME_CHARS})?`, 'MyValue', 'my_value', '12345'));
  return errors;
}

/** field.Invalid's detail as the Status cause message. */
const invalidValue = (value: string, detail: string): MetaCause => ({
  field: '',
  reason: 'FieldValueInvalid',
  message: `Invalid value: ${JSON.stringify(value)}: ${detail}`,
});

const str = (v: unknown): string => (typeof v === 'string' ? v : '');

/** An OwnerReference as Go's encoding/json writes the struct (field order, omitempty). */
function ownerReferenceJson(ref: Record<string, unknown>): Record<string, unknown> {
  return {
    apiVersion: str(ref.apiVersion),
    kind: str(ref.kind),
    name: str(ref.name),
    uid: str(ref.uid),
    ...(typeof ref.controller === 'boolean' ? { controller: ref.controller } : {}),
    ...(typeof ref.blockOwnerDeletion === 'boolean'
      ? { blockOwnerDeletion: ref.blockOwnerDeletion }
      : {}),
  };
}

/** validateOwnerReference: apiVersion, kind, name and uid set; no Event owner. */
function ownerReferenceCauses(ref: Record<string, unknown>, path: string): MetaCause[] {
  const causes: MetaCause[] = [];
  const required = (field: string): MetaCause => ({
    field: `${path}.${field}`,
    reason: 'FieldValueRequired',
    message: 'Required value: must not be empty',
  });
  const apiVersion = str(ref.apiVersion);
  // schema.ParseGroupVersion: "v", "g/v" (and "" or "/"); more slashes do not parse.
  const slashes = apiVersion.split('/').length - 1;
  const version = slashes === 0 ? apiVersion : slashes === 1 ? apiVersion.split('/')[1] : '';
  const group = slashes === 1 ? apiVersion.split('/')[0] : '';
  if (apiVersion === '') causes.push(required('apiVersion'));
  else if (version === '') {
    causes.push({
      ...invalidValue(apiVersion, 'must be <group>/<version> or <version>'),
      field: `${path}.apiVersion`,
    });
  }
  for (const field of ['kind', 'name', 'uid'])
    if (str(ref[field]) === '') causes.push(required(field));
  if (group === '' && version === 'v1' && ref.kind === 'Event') {
    causes.push({
      field: path,
      reason: 'FieldValueInvalid',
      message: `Invalid value: ${JSON.stringify(ownerReferenceJson(ref))}: /v1, Kind=Event is disallowed from being an owner`,
    });
  }
  return causes;
}

/** ValidateOwnerReferences: each reference, and at most one controller. */
function ownerReferencesCauses(refs: unknown[]): MetaCause[] {
  const causes: MetaCause[] = [];
  let firstController = '';
  refs.forEach((r, i) => {
    const ref = r && typeof r === 'object' ? (r as Record<string, unknown>) : {};
    causes.push(...ownerReferenceCauses(ref, `metadata.ownerReferences[${i}]`));
    if (ref.controller !== true) return;
    const controller = `${str(ref.kind)}/${str(ref.name)}`;
    if (firstController === '') firstController = controller;
    else {
      const all = refs.map((x) => ownerReferenceJson((x ?? {}) as Record<string, unknown>));
      causes.push({
        field: 'metadata.ownerReferences',
        reason: 'FieldValueInvalid',
        message: `Invalid value: ${JSON.stringify(all)}: Only one reference can have Controller set to true. Found "true" in references for ${firstController} and ${controller}`,
      });
    }
  });
  return causes;
}

/** ValidateFinalizers: qualified names; not both orphan and foregroundDeletion. */
function finalizerCauses(finalizers: unknown[]): MetaCause[] {
  const names = finalizers.map(str);
  const causes = names.flatMap((f) =>
    qualifiedNameErrors(f).map((e) => ({ ...invalidValue(f, e), field: 'metadata.finalizers' })),
  );
  if (names.includes('orphan') && names.includes('foregroundDeletion')) {
    causes.push({
      field: 'metadata.finalizers',
      reason: 'FieldValueInvalid',
      message: `Invalid value: ${JSON.stringify(names)}: finalizer orphan and foregroundDeletion cannot be both set`,
    });
  }
  return causes;
}

/** The ObjectMeta causes of one object (empty: it passes). */
export function objectMetaCauses(metadata: Record<string, unknown>): MetaCause[] {
  const causes: MetaCause[] = [];
  const labels = metadata.labels;
  if (labels && typeof labels === 'object') {
    for (const [key, value] of Object.entries(labels as Record<string, unknown>)) {
      for (const e of qualifiedNameErrors(key))
        causes.push({ ...invalidValue(key, e), field: 'metadata.labels' });
      if (typeof value === 'string')
        for (const e of labelValueErrors(value))
          causes.push({ ...invalidValue(value, e), field: 'metadata.labels' });
    }
  }
  const annotations = metadata.annotations;
  if (annotations && typeof annotations === 'object') {
    let total = 0;
    for (const [key, value] of Object.entries(annotations as Record<string, unknown>)) {
      for (const e of qualifiedNameErrors(key.toLowerCase()))
        causes.push({ ...invalidValue(key, e), field: 'metadata.annotations' });
      total += Buffer.byteLength(key) + (typeof value === 'string' ? Buffer.byteLength(value) : 0);
    }
    if (total > TOTAL_ANNOTATION_SIZE_LIMIT)
      causes.push({
        field: 'metadata.annotations',
        reason: 'FieldValueTooLong',
        message: `Too long: may not be more than ${TOTAL_ANNOTATION_SIZE_LIMIT} bytes`,
      });
  }
  if (Array.isArray(metadata.ownerReferences)) {
    causes.push(...ownerReferencesCauses(metadata.ownerReferences));
  }
  if (Array.isArray(metadata.finalizers)) causes.push(...finalizerCauses(metadata.finalizers));
  return causes;
}

/** The finalizers the garbage collector and namespace controller own (metav1, corev1). */
const STANDARD_FINALIZERS = new Set(['orphan', 'foregroundDeletion', 'kubernetes']);

/**
 * The warnings a custom resource write gets for the finalizers it adds
 * (apiextensions-apiserver pkg/registry/customresource: strategy.go
 * generateWarningsFromObj, validator.go validateKubeFinalizerName): each finalizer not
 * in `old`, in sorted order (sets.String.List), without a `/` and not a standard one.
 * The IsQualifiedName part of that function never fires here: such names already fail
 * ObjectMeta validation (finalizerCauses) before warnings are collected.
 */
export function finalizerWarnings(
  metadata: Record<string, unknown>,
  old?: Record<string, unknown>,
): string[] {
  const names = (v: unknown): string[] => (Array.isArray(v) ? v.map(str) : []);
  const before = new Set(names(old?.finalizers));
  const added = [...new Set(names(metadata.finalizers))].filter((f) => !before.has(f)).sort();
  return added
    .filter((f) => !f.includes('/') && !STANDARD_FINALIZERS.has(f))
    .map((f) =>
      f.includes('.')
        ? `metadata.finalizers: ${JSON.stringify(f)}: prefer a domain-qualified finalizer name including a path (/) to avoid accidental conflicts with other finalizer writers`
        : `metadata.finalizers: ${JSON.stringify(f)}: prefer a domain-qualified finalizer name to avoid accidental conflicts with other finalizer writers`,
    );
}
