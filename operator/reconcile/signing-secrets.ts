// The active signing secrets of a signed-delivery trigger (auth.method signature), read
// from its Secret: the listed keys, or every key when none are listed. Each value is
// trimmed (a Secret made with `echo` ends in a newline). A listed key that is missing or
// empty, a Secret without keys, or (standardWebhooks) a value that is not a base64
// `whsec_` secret makes the trigger invalid: Valid=False/SecretInvalid with this message.
import type { SignatureAuth } from '../../api/v1alpha1/index.ts';
import type { SecretData } from '../sources/ports.ts';

/** The secrets, sorted by key, or why the Secret cannot be used. */
export function signingSecrets(
  signature: SignatureAuth,
  secret: SecretData,
): { key: string; secret: string }[] | string {
  const name = secret.name;
  const listed = signature.secretRef.keys;
  let entries: [string, string][];
  if (listed) {
    entries = [];
    for (const key of listed) {
      const value = secret.data[key];
      if (value === undefined || value.trim() === '') {
        return `Secret "${name}" has no key "${key}" (or it is empty)`;
      }
      entries.push([key, value]);
    }
  } else {
    entries = Object.entries(secret.data).filter(([, value]) => value.trim() !== '');
    if (entries.length === 0) {
      return `Secret "${name}" holds no keys (each key holds an active signing secret)`;
    }
  }
  if (entries.length > 16) {
    return `Secret "${name}" holds ${entries.length} keys; list at most 16 active secrets in secretRef.keys`;
  }
  if (signature.preset === 'standardWebhooks') {
    for (const [key, value] of entries) {
      if (!isStandardWebhooksSecret(value.trim())) {
        return `Secret "${name}" key "${key}" is not a Standard Webhooks secret (whsec_ followed by base64)`;
      }
    }
  }
  return entries
    .map(([key, value]) => ({ key, secret: value.trim() }))
    .sort((a, b) => a.key.localeCompare(b.key));
}

function isStandardWebhooksSecret(value: string): boolean {
  const text = value.startsWith('whsec_') ? value.slice('whsec_'.length) : value;
  return text.length > 0 && text.length % 4 === 0 && /^[A-Za-z0-9+/]+={0,2}$/.test(text);
}
