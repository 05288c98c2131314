// Admin authentication by one static token (HOOKGATE_ADMIN_TOKEN_FILE), for
// deployments without a Kubernetes API: whoever holds it may do everything. Compared
// in constant time (digests of equal length, timingSafeEqual).
import { createHash, timingSafeEqual } from 'node:crypto';
import type { AdminAuthenticator, AdminUser } from './access.ts';

const digest = (value: string): Buffer => createHash('sha256').update(value).digest();

export class StaticTokenAuthenticator implements AdminAuthenticator {
  private readonly expected: Buffer;

  constructor(token: string) {
    const trimmed = token.trim();
    if (trimmed.length < 16) throw new Error('the admin token must be at least 16 characters');
    this.expected = digest(trimmed);
  }

  authenticate(token: string): Promise<AdminUser | undefined> {
    const ok = timingSafeEqual(digest(token), this.expected);
    return Promise.resolve(ok ? { username: 'hookgate-admin', groups: [] } : undefined);
  }

  authorize(): Promise<boolean> {
    return Promise.resolve(true);
  }
}
