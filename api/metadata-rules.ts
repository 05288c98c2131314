// The label and annotation rules an API server applies to every object, for the
// embedded source, which must refuse what a cluster would refuse (ADR 0004): a manifest
// that works with `hookgate dev` must also apply with kubectl.

import { isObjectName } from './identity.ts';

export interface MetadataProblem {
  field: 'metadata.labels' | 'metadata.annotations';
  message: string;
}

/** Letters, digits, '-', '_' and '.', starting and ending with a letter or digit. */
const SEGMENT = /^[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const ANNOTATIONS_MAX_BYTES = 262_144;

const KEY_RULE =
  "an optional DNS subdomain and '/', then at most 63 letters, digits, '-', '_' or '.', " +
  'starting and ending with a letter or digit (e.g. app.kubernetes.io/name)';

/** A label key, or an annotation key compared in lower case: `[prefix/]name`. */
function isQualifiedKey(key: string): boolean {
  const slash = key.indexOf('/');
  if (slash === -1) return SEGMENT.test(key);
  const prefix = key.slice(0, slash);
  return isObjectName(prefix) && SEGMENT.test(key.slice(slash + 1));
}

function entriesOf(value: unknown): [string, unknown][] {
  return value !== null && typeof value === 'object' ? Object.entries(value) : [];
}

/** What a Kubernetes API server would refuse in an object's labels and annotations. */
export function metadataProblems(metadata: Record<string, unknown>): MetadataProblem[] {
  const problems: MetadataProblem[] = [];
  for (const [key, value] of entriesOf(metadata.labels)) {
    if (!isQualifiedKey(key))
      problems.push({
        field: 'metadata.labels',
        message: `"${key}" is not a label key: ${KEY_RULE}`,
      });
    if (typeof value !== 'string')
      problems.push({ field: 'metadata.labels', message: `the value of "${key}" is not a string` });
    else if (value !== '' && !SEGMENT.test(value))
      problems.push({
        field: 'metadata.labels',
        message:
          `the value of "${key}" is not a label value: empty, or at most 63 letters, digits, ` +
          "'-', '_' or '.', starting and ending with a letter or digit",
      });
  }
  let bytes = 0;
  for (const [key, value] of entriesOf(metadata.annotations)) {
    if (!isQualifiedKey(key.toLowerCase()))
      problems.push({
        field: 'metadata.annotations',
        message: `"${key}" is not an annotation key: ${KEY_RULE}`,
      });
    if (typeof value !== 'string')
      problems.push({
        field: 'metadata.annotations',
        message: `the value of "${key}" is not a string`,
      });
    else bytes += Buffer.byteLength(key) + Buffer.byteLength(value);
  }
  if (bytes > ANNOTATIONS_MAX_BYTES)
    problems.push({
      field: 'metadata.annotations',
      message: `the annotations take ${bytes} bytes; at most ${ANNOTATIONS_MAX_BYTES} (256 KiB) in all`,
    });
  return problems;
}
