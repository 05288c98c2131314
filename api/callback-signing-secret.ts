// The form of a secret that signs Async Callbacks (Standard Webhooks): `whsec_` and the
// standard base64 of 24 to 64 bytes. One rule for the engine that signs with it, the
// operator that checks a trigger's callbackSecretRef and the start-up check of
// HOOKGATE_CALLBACK_SECRET_FILE.

export const SECRET_PREFIX = 'whsec_';

/**
 * The standard base64 alphabet, padding optional: what receivers' Standard Webhooks
 * libraries decode. Node's decoder would also take base64url and skip spaces, so a
 * secret hookgate signs with could be one no receiver can load.
 */
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** The HMAC key of a signing secret; throws saying what is wrong with it (never echoing it). */
export function signingSecretKey(secret: string): Buffer {
  if (!secret.startsWith(SECRET_PREFIX)) throw new Error(`a signing secret starts with whsec_`);
  const text = secret.slice(SECRET_PREFIX.length);
  if (!BASE64.test(text)) {
    throw new Error('a signing secret is whsec_ followed by standard base64 (A-Z a-z 0-9 + /)');
  }
  const key = Buffer.from(text, 'base64');
  if (key.length < 24 || key.length > 64) {
    throw new Error('a signing secret has 24 to 64 bytes of base64 after whsec_');
  }
  return key;
}

/** Why `secret` cannot sign, or undefined. */
export function signingSecretProblem(secret: string): string | undefined {
  try {
    signingSecretKey(secret);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}
