// The active signing secrets a trigger references, read from a Secret: the listed keys,
// or every key when none are listed. Each value is trimmed (a Secret made with `echo`
// ends in a newline). A listed key that is missing or empty, a Secret without keys, or a
// value of the wrong form makes the trigger invalid: Valid=False/SecretInvalid with the
// message returned here. Two uses: the secrets senders sign deliveries with
// (auth.signature; standardWebhooks values are `whsec_` secrets) and the ones the
// gateway signs Async Callbacks with (response.callbackSecretRef; always `whsec_`).
import type { SignatureAuth } from '../../api/v1alpha1/index.ts';
import { MAX_SIGNING_SECRETS } from '../../api/v1alpha1/index.ts';
import { signingSecretProblem } from '../../api/callback-signing-secret.ts';
import type { SecretData } from '../sources/ports.ts';

/** `secretRef` of auth.signature or response.callbackSecretRef. */
type SecretsRef = SignatureAuth['secretRef'];

/** The secrets, sorted by key, or why the Secret cannot be used. */
export function signingSecrets(
  signature: SignatureAuth,
  secret: SecretData,
): { key: string; secret: string }[] | string {
  const entries = secretEntries(signature.secretRef, secret);
  if (typeof entries === 'string') return entries;
  if (signature.preset === 'standardWebhooks') {
    for (const { key, secret: value } of entries) {
      if (!isStandardWebhooksSecret(value)) {
        return `Secret "${secret.name}" key "${key}" is not a Standard Webhooks secret (whsec_ followed by base64)`;
      }
    }
  }
  return entries;
}

/**
 * The secrets that sign a trigger's Async Callbacks, in key order (the first is the one
 * to give receivers first), or why the Secret cannot give them: each must be a Standard
 * Webhooks secret, `whsec_` and the base64 of 24 to 64 bytes, as the sender needs.
 */
export function callbackSigningSecrets(ref: SecretsRef, secret: SecretData): string[] | string {
  const entries = secretEntries(ref, secret);
  if (typeof entries === 'string') return entries;
  for (const { key, secret: value } of entries) {
    if (signingSecretProblem(value) !== undefined) {
      return `Secret "${secret.name}" key "${key}" is not a callback signing secret (whsec_ followed by the standard base64 of 24 to 64 random bytes, e.g. whsec_$(openssl rand -base64 32))`;
    }
  }
  return entries.map((entry) => entry.secret);
}

function secretEntries(
  ref: SecretsRef,
  secret: SecretData,
): { key: string; secret: string }[] | string {
  const name = secret.name;
  const listed = ref.keys;
  let entries: [string, string][];
  if (listed) {
    entries = [];
    for (const key of listed) {
      // Own keys only: a key named `constructor` or `toString` is not Object's method.
      const value = Object.hasOwn(secret.data, key) ? secret.data[key] : undefined;
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
  if (entries.length > MAX_SIGNING_SECRETS) {
    return `Secret "${name}" holds ${entries.length} keys; name at most ${MAX_SIGNING_SECRETS} of them in this reference's keys`;
  }
  return entries
    .map(([key, value]) => ({ key, secret: value.trim() }))
    .sort((a, b) => a.key.localeCompare(b.key));
}

function isStandardWebhooksSecret(value: string): boolean {
  const text = value.startsWith('whsec_') ? value.slice('whsec_'.length) : value;
  return text.length > 0 && text.length % 4 === 0 && /^[A-Za-z0-9+/]+={0,2}$/.test(text);
}
