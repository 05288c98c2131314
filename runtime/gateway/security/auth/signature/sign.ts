// Signing a delivery the way the trigger's sender would, with the first of its active
// secrets: what Send Test Request sends to a signed endpoint (it has no other
// credentials to send). The same scheme tables as the verifier; the tests check the
// verifier against independent signatures, so this cannot drift from the senders
// without a verifier test failing too.
import { randomUUID } from 'node:crypto';
import type { RouteRecord } from '../../../../../api/records/records.ts';
import { HttpProblem } from '../../../../errors.ts';
import { schemeOf, signedDigest } from './schemes.ts';

/** The signature headers of a delivery of `body` at `nowMs` to a signed route. */
export function signDelivery(
  route: RouteRecord,
  body: Buffer,
  nowMs: number = Date.now(),
): Record<string, string> {
  const signature = route.spec.auth?.signature;
  const first = route.credentials.signingSecrets?.[0];
  if (!signature || !first) {
    throw new HttpProblem(
      'HG_ERR_TEST_CREDENTIALS_MISSING',
      'The endpoint has no signing secret to sign a test request with',
    );
  }
  const scheme = schemeOf(signature);
  const timestamp = String(Math.floor(nowMs / 1000));
  const id = `test_${randomUUID()}`;
  const digest = signedDigest(scheme, scheme.key(first.secret), { timestamp, id }, body);
  const headers: Record<string, string> = {
    [scheme.header.toLowerCase()]: scheme.render(digest.toString(scheme.encoding), timestamp),
  };
  if (scheme.timestampHeader) headers[scheme.timestampHeader.toLowerCase()] = timestamp;
  if (scheme.idHeader) headers[scheme.idHeader.toLowerCase()] = id;
  return headers;
}
