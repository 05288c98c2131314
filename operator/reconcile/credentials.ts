// Resolves the Secrets a WebhookTrigger references into the material the gateway
// needs. API keys leave here only as SHA-256 digests; signing secrets as they are (an
// HMAC needs the secret itself).
import { createHash } from 'node:crypto';
import type { WebhookTriggerSpec } from '../../api/v1alpha1/index.ts';
import { Reason, weakHmacSecret } from '../../api/v1alpha1/index.ts';
import type { ResolvedCredentials } from '../../api/records/records.ts';
import type { SecretData } from '../sources/ports.ts';
import { callbackSigningSecrets, signingSecrets } from './signing-secrets.ts';

export type CredentialResult =
  | { ok: true; credentials: ResolvedCredentials }
  | {
      ok: false;
      reason:
        typeof Reason.SecretNotFound | typeof Reason.SecretInvalid | typeof Reason.SecretForbidden;
      message: string;
    };

export function sha256Hex(value: string): string {
  return createHash('sha256').update(value, 'utf8').digest('hex');
}

/** Names of the Secrets a trigger spec references (for change propagation). */
export function referencedSecrets(spec: WebhookTriggerSpec): string[] {
  const names = [
    spec.auth?.apiKey?.secretRef.name,
    spec.auth?.bearer?.keySecretRef?.name,
    spec.auth?.oauth2?.introspection?.clientSecretRef.name,
    spec.auth?.signature?.secretRef.name,
    spec.response.callbackSecretRef?.name,
    spec.testCredentials?.secretRef.name,
  ];
  return [...new Set(names.filter((n): n is string => typeof n === 'string'))];
}

/**
 * Where the Secrets come from, for the SecretNotFound message: the namespace, and the
 * label selector the source sees Secrets through (undefined when it sees them all).
 */
export interface SecretScope {
  namespace: string;
  selector?: string | undefined;
  /** False when the source watches no Secrets in this namespace. Default true. */
  watched?: boolean;
  /** The API server's 403 message while it refuses the Secrets of this namespace. */
  forbidden?: string | undefined;
}

/**
 * "Secret "x" not found", and when the source only sees labelled Secrets, the likely
 * fix: an existing Secret without the label looks exactly like a missing one.
 */
export function secretNotFound(field: string, name: string, scope?: SecretScope): string {
  const missing = `${field}: Secret "${name}" not found`;
  if (!scope?.selector) return missing;
  return (
    `${missing} among the Secrets labelled ${scope.selector} (the only ones the operator ` +
    `watches); if it exists, label it: kubectl label secret ${name} -n ${scope.namespace} ${scope.selector}`
  );
}

/**
 * Why the operator cannot see the Secrets of the trigger's namespace at all, or
 * undefined: not configured to watch there (rbac.secretNamespaces), or refused (403).
 */
function secretForbidden(field: string, name: string, scope?: SecretScope): string | undefined {
  const cannot = `${field}: Secret "${name}" cannot be read`;
  if (scope?.watched === false) {
    return `${cannot}: the operator watches no Secrets in namespace ${scope.namespace} (only in the namespaces it is configured with, rbac.secretNamespaces)`;
  }
  if (scope?.forbidden !== undefined) {
    return `${cannot}: the API server refuses the operator the Secrets of namespace ${scope.namespace}: ${scope.forbidden}`;
  }
  return undefined;
}

/** The failure for a Secret `getSecret` did not find. */
function missingSecret(field: string, name: string, scope?: SecretScope): CredentialResult {
  const forbidden = secretForbidden(field, name, scope);
  if (forbidden !== undefined)
    return { ok: false, reason: Reason.SecretForbidden, message: forbidden };
  return { ok: false, reason: Reason.SecretNotFound, message: secretNotFound(field, name, scope) };
}

export function resolveCredentials(
  spec: WebhookTriggerSpec,
  getSecret: (name: string) => SecretData | undefined,
  scope?: SecretScope,
): CredentialResult {
  const credentials: ResolvedCredentials = {};
  const auth = spec.auth;

  const read = (field: string, name: string, key: string): { value: string } | CredentialResult => {
    const secret = getSecret(name);
    if (!secret) return missingSecret(field, name, scope);
    // Own keys only: a key named `constructor` or `toString` is not Object's method.
    const value = Object.hasOwn(secret.data, key) ? secret.data[key] : undefined;
    if (value === undefined || value.trim() === '') {
      return {
        ok: false,
        reason: Reason.SecretInvalid,
        message: `${field}: Secret "${name}" has no key "${key}" (or it is empty)`,
      };
    }
    return { value };
  };

  if (auth?.method === 'apiKey' && auth.apiKey) {
    const name = auth.apiKey.secretRef.name;
    const secret = getSecret(name);
    if (!secret) return missingSecret('spec.auth.apiKey.secretRef', name, scope);
    const entries = Object.entries(secret.data).filter(([, v]) => v.trim() !== '');
    if (entries.length === 0) {
      return {
        ok: false,
        reason: Reason.SecretInvalid,
        message: `spec.auth.apiKey.secretRef: Secret "${name}" holds no keys (each key is a consumer id, each value an API key)`,
      };
    }
    credentials.apiKeys = entries
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([consumer, key]) => ({ consumer, sha256: sha256Hex(key.trim()) }));
  }
  if (auth?.method === 'bearer' && auth.bearer?.keySecretRef) {
    const r = readBearerKey(auth.bearer.keySecretRef, auth.bearer.algorithms, read);
    if ('ok' in r) return r;
    credentials.jwtKey = r.value;
  }
  if (auth?.method === 'oauth2' && auth.oauth2?.introspection) {
    const ref = auth.oauth2.introspection.clientSecretRef;
    const r = read('spec.auth.oauth2.introspection.clientSecretRef', ref.name, ref.key);
    if ('ok' in r) return r;
    credentials.introspectionClientSecret = r.value.trim();
  }
  const signingFailure = addSigningSecrets(credentials, spec, getSecret, scope);
  if (signingFailure) return signingFailure;
  const callbackFailure = addCallbackSecrets(credentials, spec, getSecret, scope);
  if (callbackFailure) return callbackFailure;
  if (spec.testCredentials) {
    const ref = spec.testCredentials.secretRef;
    const r = read('spec.testCredentials.secretRef', ref.name, ref.key);
    if ('ok' in r) return r;
    credentials.testCredential = r.value.trim();
  }
  return { ok: true, credentials };
}

/**
 * The static key of a bearer trigger, trimmed as every other credential (a Secret made
 * from `echo`'s output ends in a newline: an HS* secret with it verified no token; a
 * PEM or JWK is unchanged by it), or why it cannot be used: an HS* secret shorter than
 * its hash (RFC 7518 §3.2) is SecretInvalid.
 */
function readBearerKey(
  ref: { name: string; key: string },
  algorithms: readonly string[],
  read: (field: string, name: string, key: string) => { value: string } | CredentialResult,
): { value: string } | CredentialResult {
  const field = 'spec.auth.bearer.keySecretRef';
  const r = read(field, ref.name, ref.key);
  if ('ok' in r) return r;
  const value = r.value.trim();
  // A static key allows exactly one algorithm (the CRD's rule).
  const weak = weakHmacSecret(algorithms[0] ?? '', value);
  if (weak === undefined) return { value };
  return {
    ok: false,
    reason: Reason.SecretInvalid,
    message: `${field}: Secret "${ref.name}" key "${ref.key}": ${weak}`,
  };
}

/** Signed deliveries: the active signing secrets, or why the Secret cannot give them. */
function addSigningSecrets(
  credentials: ResolvedCredentials,
  spec: WebhookTriggerSpec,
  getSecret: (name: string) => SecretData | undefined,
  scope: SecretScope | undefined,
): CredentialResult | undefined {
  const signature = spec.auth?.method === 'signature' ? spec.auth.signature : undefined;
  if (!signature) return undefined;
  const name = signature.secretRef.name;
  const field = 'spec.auth.signature.secretRef';
  const secret = getSecret(name);
  if (!secret) return missingSecret(field, name, scope);
  const resolved = signingSecrets(signature, secret);
  if (typeof resolved === 'string') {
    return { ok: false, reason: Reason.SecretInvalid, message: `${field}: ${resolved}` };
  }
  credentials.signingSecrets = resolved;
  return undefined;
}

/** Async Callbacks signed with the trigger's own secrets, or why its Secret cannot give them. */
function addCallbackSecrets(
  credentials: ResolvedCredentials,
  spec: WebhookTriggerSpec,
  getSecret: (name: string) => SecretData | undefined,
  scope: SecretScope | undefined,
): CredentialResult | undefined {
  const ref = spec.response.callbackSecretRef;
  if (!ref) return undefined;
  const field = 'spec.response.callbackSecretRef';
  const secret = getSecret(ref.name);
  if (!secret) return missingSecret(field, ref.name, scope);
  const resolved = callbackSigningSecrets(ref, secret);
  if (typeof resolved === 'string') {
    return { ok: false, reason: Reason.SecretInvalid, message: `${field}: ${resolved}` };
  }
  credentials.callbackSecrets = resolved;
  return undefined;
}
