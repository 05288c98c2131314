// Admin authentication by one static token (HOOKGATE_ADMIN_TOKEN_FILE, read again when
// it changes), for
// deployments without a Kubernetes API: whoever holds it may do everything. Compared
// in constant time (digests of equal length, timingSafeEqual).
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync, statSync, type Stats } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
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

export interface TokenFileOptions {
  /** How often the file is looked at again, at most (ms); default 1 s. */
  recheckMs?: number;
  /** Told when the file became unreadable or its token invalid (all tokens refused). */
  onError?: (message: string) => void;
  now?: () => number;
}

/**
 * The static token read from a file, and read again when the file changes (a mounted
 * Secret is swapped in place when it is updated): revoking a leaked token is a Secret
 * update, not a restart. A file that became unreadable or holds an invalid token
 * refuses every token until it is fixed: failing closed, so that blanking the Secret
 * revokes. The file is looked at (a stat) at most once per `recheckMs`.
 */
export class TokenFileAuthenticator implements AdminAuthenticator {
  readonly #path: string;
  readonly #recheckMs: number;
  readonly #onError: (message: string) => void;
  readonly #now: () => number;
  #current: StaticTokenAuthenticator | undefined;
  /** What identifies the version read: inode, size and modification time. */
  #version: string;
  #checkedAt: number;
  #checking: Promise<void> | undefined;

  /** Reads the file now; throws when it is unreadable or its token is invalid (start-up). */
  constructor(path: string, options: TokenFileOptions = {}) {
    this.#path = path;
    this.#recheckMs = options.recheckMs ?? 1_000;
    this.#onError = options.onError ?? (() => {});
    this.#now = options.now ?? Date.now;
    this.#version = versionOf(statSync(path));
    this.#current = new StaticTokenAuthenticator(readFileSync(path, 'utf8'));
    this.#checkedAt = this.#now();
  }

  async authenticate(token: string): Promise<AdminUser | undefined> {
    if (this.#now() - this.#checkedAt >= this.#recheckMs) await (this.#checking ??= this.#check());
    return this.#current ? this.#current.authenticate(token) : undefined;
  }

  authorize(): Promise<boolean> {
    return Promise.resolve(true);
  }

  async #check(): Promise<void> {
    try {
      const version = versionOf(await stat(this.#path));
      if (version === this.#version && this.#current) return;
      this.#version = version;
      this.#current = new StaticTokenAuthenticator(await readFile(this.#path, 'utf8'));
    } catch (error) {
      if (this.#current) this.#onError(`admin token file ${this.#path}: ${String(error)}`);
      this.#current = undefined;
      this.#version = '';
    } finally {
      this.#checkedAt = this.#now();
      this.#checking = undefined;
    }
  }
}

function versionOf(s: Stats): string {
  return `${s.ino}:${s.size}:${s.mtimeMs}`;
}
