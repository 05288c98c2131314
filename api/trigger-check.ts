// Checks on a WebhookTrigger that its CRD schema cannot express and that need nothing
// but the trigger itself (the operator checks Secrets and the workflow besides).
import type { WebhookTriggerSpec } from './v1alpha1/index.ts';
import { neverReachable } from './v1alpha1/outbound-never.ts';

/**
 * Problems found, each as "<field path>: <message>": authentication provider URLs no
 * outbound policy could open (a metadata service, the unspecified address), where the
 * gateway would answer every request 503 auth-unavailable.
 */
export function checkTrigger(spec: WebhookTriggerSpec): string[] {
  const urls: [string, string | undefined][] = [
    ['spec.auth.bearer.jwksUrl', spec.auth?.bearer?.jwksUrl],
    ['spec.auth.oauth2.jwksUrl', spec.auth?.oauth2?.jwksUrl],
    ['spec.auth.oauth2.introspection.url', spec.auth?.oauth2?.introspection?.url],
  ];
  const problems: string[] = [];
  for (const [field, url] of urls) {
    const why = url === undefined ? undefined : neverReachable(url);
    if (why) problems.push(`${field}: ${why}`);
  }
  return problems;
}
