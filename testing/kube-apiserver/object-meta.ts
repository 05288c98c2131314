// ObjectMeta rules every object passes on create and update, as apimachinery's
// ValidateObjectMeta checks them: label keys and values (metav1validation.ValidateLabels)
// and annotation keys and their total size (ValidateAnnotations). Messages are the
// API server's own (k8s.io/apimachinery/pkg/util/validation), so a client that
// matches on them sees what a real cluster would send.

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

/** validation.IsQualifiedName: `[prefix/]name`, prefix a DNS subdomain. */
function qualifiedNameErrors(value: string): string[] {
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
      if (prefix.length > 253) errors.push('prefix part must be no more than 253 characters');
      if (!DNS1123_SUBDOMAIN.test(prefix))
        errors.push(
          `prefix part ${regexError(SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, 'example.com')}`,
        );
    }
  } else {
    return [
      `a qualified name ${regexError(QUALIFIED_NAME_MSG, NAME_CHARS, 'MyName', 'my.name', '123-abc')}` +
        " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
    ];
  }
  if (name.length === 0) errors.push('name part must be non-empty');
  else if (name.length > 63) errors.push('name part must be no more than 63 characters');
  if (!QUALIFIED_NAME_PART.test(name))
    errors.push(
      `name part ${regexError(QUALIFIED_NAME_MSG, NAME_CHARS, 'MyName', 'my.name', '123-abc')}`,
    );
  return errors;
}

/** validation.IsValidLabelValue. */
function labelValueErrors(value: string): string[] {
  const errors: string[] = [];
  if (value.length > 63) errors.push('must be no more than 63 characters');
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

/** The label and annotation causes of one object (empty: it passes). */
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
  return causes;
}
