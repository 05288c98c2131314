// admin.ingress: the admin listener (read API, dashboard, live streams) published the
// way users reach the cluster, on its own host or beside /webhook/ on the webhook host,
// and never unauthenticated.
import { describe, expect, it } from 'vitest';
import { find, render, renderError, tools, type K8sObject } from './chart.ts';

interface Ingress extends K8sObject {
  spec: {
    ingressClassName?: string;
    tls?: { hosts: string[]; secretName: string }[];
    rules: {
      host: string;
      http: {
        paths: {
          path: string;
          pathType: string;
          backend: { service: { name: string; port: { name: string } } };
        }[];
      };
    }[];
  };
}

describe.skipIf(!tools)('chart: admin Ingress', () => {
  it('is off by default', async () => {
    const objects = await render();
    expect(objects.some((o) => o.kind === 'Ingress')).toBe(false);
  });

  it('routes the admin paths on the webhook host to the admin Service', async () => {
    const objects = await render(
      'ingress.enabled=true',
      'ingress.host=hooks.example.com',
      'ingress.className=nginx',
      'ingress.tls.enabled=true',
      'admin.ingress.enabled=true',
    );
    const admin = find<Ingress>(objects, 'Ingress', 'hg-hookgate-admin');
    expect(admin.spec.ingressClassName).toBe('nginx');
    const [rule] = admin.spec.rules;
    expect(rule?.host).toBe('hooks.example.com');
    expect(rule?.http.paths.map((p) => p.path)).toEqual([
      '/api/',
      '/dashboard',
      '/webhook-events/',
    ]);
    for (const p of rule?.http.paths ?? []) {
      expect(p.pathType).toBe('Prefix');
      expect(p.backend.service).toEqual({ name: 'hg-hookgate-admin', port: { name: 'admin' } });
    }
    // The webhook Ingress still publishes only the webhooks and the callers' links.
    const webhooks = find<Ingress>(objects, 'Ingress', 'hg-hookgate-gateway');
    expect(webhooks.spec.rules[0]?.http.paths.map((p) => p.path)).toEqual([
      '/webhook/',
      '/webhook-executions/',
    ]);
  });

  it('takes a host and TLS of its own', async () => {
    const objects = await render(
      'admin.ingress.enabled=true',
      'admin.ingress.host=admin.example.com',
      'admin.ingress.tls.enabled=true',
    );
    const admin = find<Ingress>(objects, 'Ingress', 'hg-hookgate-admin');
    expect(admin.spec.rules[0]?.host).toBe('admin.example.com');
    expect(admin.spec.tls).toEqual([
      { hosts: ['admin.example.com'], secretName: 'hg-hookgate-admin-tls' },
    ]);
  });

  it("on the webhook host, carries the webhook Ingress' TLS itself", async () => {
    // Controllers that build each Ingress apart (or redirect to https only for an Ingress
    // with TLS) would otherwise serve the admin paths, bearer tokens and all, over http.
    const objects = await render(
      'ingress.enabled=true',
      'ingress.host=hooks.example.com',
      'ingress.tls.enabled=true',
      'admin.ingress.enabled=true',
    );
    const admin = find<Ingress>(objects, 'Ingress', 'hg-hookgate-admin');
    expect(admin.spec.tls).toEqual([
      { hosts: ['hooks.example.com'], secretName: 'hg-hookgate-tls' },
    ]);
    // Its own TLS wins; another host never takes the webhook host's certificate.
    const own = await render(
      'ingress.enabled=true',
      'ingress.host=hooks.example.com',
      'ingress.tls.enabled=true',
      'admin.ingress.enabled=true',
      'admin.ingress.tls.enabled=true',
      'admin.ingress.tls.secretName=admin-cert',
    );
    expect(find<Ingress>(own, 'Ingress', 'hg-hookgate-admin').spec.tls).toEqual([
      { hosts: ['hooks.example.com'], secretName: 'admin-cert' },
    ]);
    expect(
      await renderError(
        'ingress.enabled=true',
        'ingress.host=hooks.example.com',
        'ingress.tls.enabled=true',
        'admin.ingress.enabled=true',
        'admin.ingress.host=admin.example.com',
      ),
    ).toContain('without TLS');
  });

  it('is refused without TLS (bearer tokens in clear) unless TLS ends before the controller', async () => {
    for (const sets of [
      ['ingress.enabled=true', 'ingress.host=hooks.example.com', 'admin.ingress.enabled=true'],
      ['admin.ingress.enabled=true', 'admin.ingress.host=admin.example.com'],
    ]) {
      const error = await renderError(...sets);
      expect(error).toContain('without TLS');
      expect(error).toContain('admin.ingress.plainHttp=true');
    }
    const plain = await render(
      'admin.ingress.enabled=true',
      'admin.ingress.host=admin.example.com',
      'admin.ingress.plainHttp=true',
    );
    expect(find<Ingress>(plain, 'Ingress', 'hg-hookgate-admin').spec.tls).toBeUndefined();
    expect(await renderError('admin.ingress.plainHttp=yes')).toMatch(/plainHttp/);
  });

  it('is refused without a host, and with admin.auth none', async () => {
    expect(await renderError('admin.ingress.enabled=true')).toContain(
      'admin.ingress.host (or ingress.host) is required',
    );
    expect(
      await renderError(
        'admin.ingress.enabled=true',
        'admin.ingress.host=a.example.com',
        'admin.auth=none',
      ),
    ).toContain('must not be published unauthenticated');
    expect(await renderError('admin.ingress.enabled=yes')).toMatch(
      /admin\/ingress\/enabled|enabled/,
    );
  });
});
