// The answers of a refused signed delivery: one catalogued 401 per check, so that the
// sender's operator (and the rejected-requests metric, labelled by problem type) can
// tell which check failed. None of them carries an expected value or a secret.
import { HttpProblem, type ErrorCode } from '../../../../errors.ts';

/** The WWW-Authenticate challenge of every signature 401: the header to sign into. */
export function signatureChallenge(header: string): string {
  return `WebhookSignature header="${header}"`;
}

function refused(code: ErrorCode, header: string, detail: string): HttpProblem {
  return new HttpProblem(code, detail, {
    headers: { 'WWW-Authenticate': signatureChallenge(header) },
  });
}

/** A header the scheme needs is absent or empty. */
export function missing(signatureHeader: string, absent: string): HttpProblem {
  return refused(
    'HG_ERR_SIGNATURE_MISSING',
    signatureHeader,
    `The ${absent} header is missing; this endpoint accepts signed deliveries only.`,
  );
}

/** A header is present but not in the scheme's format. */
export function malformed(signatureHeader: string, detail: string): HttpProblem {
  return refused('HG_ERR_SIGNATURE_MALFORMED', signatureHeader, detail);
}

/** The signed timestamp is further from the gateway clock than the tolerance. */
export function outsideTolerance(signatureHeader: string, toleranceSeconds: number): HttpProblem {
  return refused(
    'HG_ERR_SIGNATURE_EXPIRED',
    signatureHeader,
    `The signed timestamp is more than ${toleranceSeconds} s from the current time.`,
  );
}

/** Well-formed, in time, and wrong: no signature matches the body with any active secret. */
export function mismatch(signatureHeader: string): HttpProblem {
  return refused(
    'HG_ERR_SIGNATURE_MISMATCH',
    signatureHeader,
    `No signature in the ${signatureHeader} header matches the request body with any active secret.`,
  );
}

/**
 * The delivery was already accepted within the tolerance window; or (`otherBody`) its id
 * was, with another body: never the same delivery, whatever its signature.
 */
export function replayed(signatureHeader: string, byId: boolean, otherBody = false): HttpProblem {
  return refused(
    'HG_ERR_SIGNATURE_REPLAYED',
    signatureHeader,
    otherBody
      ? 'A delivery with this id was already accepted with a different body; it is refused.'
      : byId
        ? 'A delivery with this id was already accepted; replays are refused.'
        : 'This signed delivery was already accepted; replays are refused.',
  );
}
