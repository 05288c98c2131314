// The admin listener's authentication, from the settings: Kubernetes TokenReview and
// SubjectAccessReview through the role's kubeconfig (in a pod: its service account),
// one static token from a file, or none (the dev server on loopback).
import { request as httpRequest } from 'node:http';
import { request as httpsRequest, type RequestOptions } from 'node:https';
import { KubeConfig } from '@kubernetes/client-node';
import { AdminAccess } from '../runtime/admin/access.ts';
import { KubernetesAuthenticator, type KubePost } from '../runtime/admin/kubernetes.ts';
import { TokenFileAuthenticator } from '../runtime/admin/static-token.ts';
import type { Logger } from 'pino';
import type { Settings } from './settings.ts';

/** POSTs JSON to the API server of a kubeconfig, with its credentials and CA. */
export function kubePost(kc: KubeConfig): KubePost {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('the kubeconfig has no current cluster');
  const server = new URL(cluster.server);
  return async (path, body) => {
    const options: RequestOptions = { method: 'POST', headers: {} };
    await kc.applyToHTTPSOptions(options);
    const payload = JSON.stringify(body);
    const url = new URL(path, server);
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    return new Promise<unknown>((resolve, reject) => {
      const req = send(
        url,
        {
          ...options,
          headers: {
            ...options.headers,
            'content-type': 'application/json',
            accept: 'application/json',
            'content-length': Buffer.byteLength(payload),
          },
          timeout: 10_000,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            if ((res.statusCode ?? 500) >= 300) {
              reject(new Error(`POST ${path}: HTTP ${res.statusCode}: ${text.slice(0, 200)}`));
              return;
            }
            try {
              resolve(JSON.parse(text));
            } catch (err) {
              reject(err instanceof Error ? err : new Error(String(err)));
            }
          });
        },
      );
      req.on('timeout', () => req.destroy(new Error(`POST ${path}: timed out`)));
      req.on('error', reject);
      req.end(payload);
    });
  };
}

export function adminAccess(
  s: Settings,
  logger: Logger,
  kubeConfig?: () => KubeConfig,
): AdminAccess {
  const streams = {
    onRecheckError: (error: unknown) =>
      logger.warn(
        { error: error instanceof Error ? error.message : String(error) },
        'a live stream could not be checked again: the admin authenticator did not answer',
      ),
  };
  if (s.adminAuth === 'token') {
    return new AdminAccess(
      new TokenFileAuthenticator(s.adminTokenFile ?? '', {
        onError: (message) =>
          logger.error(`${message}: every admin token is refused until it is fixed`),
      }),
      streams,
    );
  }
  if (s.adminAuth === 'kubernetes') {
    const kc = kubeConfig?.() ?? defaultKubeConfig();
    return new AdminAccess(new KubernetesAuthenticator({ post: kubePost(kc) }), streams);
  }
  return new AdminAccess();
}

function defaultKubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromDefault();
  return kc;
}
