// Send Test Request goes through the webhook pipeline in-process (Fastify inject), so
// it never crosses a network: an endpoint's requireHttps, which protects credentials
// in transit, has nothing to protect on that hop. The admin side marks its injected
// requests with a header carrying a random per-process token; the pipeline counts a
// request bearing that exact token as HTTPS and removes the header before anything
// else (workflow input, live stream, logs) sees it. The token never leaves the process,
// so a client cannot forge the mark over the network.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { HeaderMap } from './headers.ts';

export const TEST_REQUEST_HEADER = 'x-hookgate-in-process-test';

const token = randomBytes(32).toString('hex');
const tokenBytes = Buffer.from(token);

/** The header the admin side sets on an injected test request. */
export function testRequestMark(): Record<string, string> {
  return { [TEST_REQUEST_HEADER]: token };
}

/**
 * Whether the request carries this process's mark; removes the header either way, so
 * neither a real nor a forged mark reaches the workflow.
 */
export function takeTestRequestMark(headers: HeaderMap): boolean {
  const value = headers[TEST_REQUEST_HEADER];
  if (value === undefined) return false;
  delete headers[TEST_REQUEST_HEADER];
  if (typeof value !== 'string') return false;
  const bytes = Buffer.from(value);
  return bytes.length === tokenBytes.length && timingSafeEqual(bytes, tokenBytes);
}
