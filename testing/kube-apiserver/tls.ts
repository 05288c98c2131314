// A self-signed serving certificate for 127.0.0.1, made with the openssl CLI when the
// server starts with `tls: true`. kubectl (client-go) sends no bearer token over plain
// http, so a server that authenticates requests must speak https to it, as a real one
// does; the kubeconfig then carries the certificate as its certificate authority.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface ServingCertificate {
  /** PEM certificate (also the CA clients trust). */
  cert: string;
  /** PEM private key. */
  key: string;
}

export async function selfSignedCertificate(): Promise<ServingCertificate> {
  const dir = await mkdtemp(join(tmpdir(), 'kube-apiserver-tls-'));
  try {
    await run(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-days',
        '2',
        '-subj',
        '/CN=kube-apiserver',
        '-addext',
        'subjectAltName=IP:127.0.0.1,DNS:localhost',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
      ],
      { timeout: 30_000 },
    );
    return {
      cert: await readFile(join(dir, 'cert.pem'), 'utf8'),
      key: await readFile(join(dir, 'key.pem'), 'utf8'),
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
