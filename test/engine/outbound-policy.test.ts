// The outbound policy: cluster allow/deny, per-namespace and per-workflow narrowing,
// the never-allowed metadata and unspecified addresses, encodings, and the decision
// made on the address actually connected to.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  OutboundGuard,
  OutboundRefusedError,
  type LookupFn,
  type OutboundGuardOptions,
  type OutboundTarget,
} from '../../runtime/engine/outbound/guard.ts';
import { rulesProblems } from '../../runtime/engine/outbound/policy.ts';
import { sendOutbound } from '../../runtime/engine/outbound/request.ts';
import { startReceiver, type Receiver } from './receiver.ts';

function stubLookup(answers: Record<string, string[]>): LookupFn {
  return (hostname, _options, callback) => {
    const list = answers[hostname];
    if (!list) {
      callback(Object.assign(new Error(`ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), []);
      return;
    }
    callback(
      null,
      list.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })),
    );
  };
}

const guards: OutboundGuard[] = [];
function guard(options: OutboundGuardOptions = {}): OutboundGuard {
  const g = new OutboundGuard(options);
  guards.push(g);
  return g;
}
afterEach(async () => {
  await Promise.all(guards.splice(0).map((g) => g.close()));
});

const ANY = { protocols: ['http:', 'https:'] };
const refusal = (t: OutboundTarget, url: string): string | undefined => {
  try {
    t.check(url, ANY);
    return undefined;
  } catch (error) {
    expect(error).toBeInstanceOf(OutboundRefusedError);
    return (error as Error).message;
  }
};
const workflow = (namespace: string, outbound?: { allow?: string[]; deny?: string[] }) => ({
  namespace,
  spec: outbound ? { outbound } : {},
});

describe('cluster policy', () => {
  it('private ranges are refused by default and opened by a CIDR', () => {
    expect(refusal(guard(), 'http://10.1.2.3/')).toMatch(/not public \(private\)/);
    const g = guard({ allow: ['10.0.0.0/8', 'fd00:10::/64', '100.64.0.0/10'] });
    expect(refusal(g, 'http://10.1.2.3/')).toBeUndefined();
    expect(refusal(g, 'http://[fd00:10::5]/')).toBeUndefined();
    expect(refusal(g, 'http://100.64.1.1/')).toBeUndefined();
    expect(refusal(g, 'http://192.168.1.1/')).toMatch(/private/);
  });

  it('loopback and link-local are opened only by an address entry, never by a host name', async () => {
    const g = guard({
      allow: ['*.svc.cluster.local', 'localhost'],
      lookup: stubLookup({
        'loop.ns.svc.cluster.local': ['127.0.0.1'],
        'api.ns.svc.cluster.local': ['10.96.0.10'],
        localhost: ['127.0.0.1'],
      }),
    });
    const send = (url: string) =>
      sendOutbound(g, { method: 'GET', url, timeoutMs: 2000, protocols: ['http:'] });
    await expect(send('http://loop.ns.svc.cluster.local:9/')).rejects.toThrow(
      /loop\.ns\.svc\.cluster\.local resolves to a refused address 127\.0\.0\.1: .*loopback/,
    );
    await expect(send('http://localhost:9/')).rejects.toThrow(/loopback/);
    expect(refusal(g, 'http://127.0.0.1/')).toMatch(/loopback/);
    const opened = guard({ allow: ['127.0.0.0/8', '169.254.0.0/16'] });
    expect(refusal(opened, 'http://127.0.0.1/')).toBeUndefined();
    expect(refusal(opened, 'http://169.254.10.1/')).toBeUndefined();
  });

  it('metadata and unspecified addresses are never allowed, whatever the CIDRs say', () => {
    const g = guard({ allow: ['169.254.0.0/16', '0.0.0.0/0', '::/0', '100.64.0.0/10'] });
    for (const url of [
      'http://169.254.169.254/latest/meta-data/',
      'http://169.254.170.2/v2/credentials',
      'http://100.100.100.200/latest/meta-data/',
      'http://168.63.129.16/',
      'http://[fd00:ec2::254]/',
      'http://0.0.0.0:8081/',
      'http://[::]/',
      'http://[::ffff:169.254.169.254]/',
      'http://[::ffff:a9fe:a9fe]/',
      'http://2852039166/',
      'http://0xa9fea9fe/',
      'http://0251.0376.0251.0376/',
      'http://169.254.43518/',
    ]) {
      expect(refusal(g, url), url).toMatch(/never allowed/);
    }
    expect(refusal(g, 'http://metadata.google.internal/')).toMatch(/metadata service/);
    expect(refusal(g, 'http://METADATA.google.internal./')).toMatch(/metadata service/);
  });

  it('an IPv6 address that carries a metadata IPv4 (NAT64, 6to4) is never allowed', () => {
    const g = guard({ allow: ['64:ff9b::/96', '2002::/16'] });
    expect(refusal(g, 'http://[64:ff9b::a9fe:a9fe]/')).toMatch(/never allowed/);
    expect(refusal(g, 'http://[2002:a9fe:a9fe::1]/')).toMatch(/never allowed/);
    // The same prefixes carrying a public address are opened by the entries.
    expect(refusal(g, 'http://[64:ff9b::808:808]/')).toBeUndefined();
  });

  it('refuses loopback in every encoding, with private CIDRs open', () => {
    const g = guard({ allow: ['10.0.0.0/8'] });
    for (const url of [
      'http://2130706433/',
      'http://0x7f000001/',
      'http://017700000001/',
      'http://0177.0.0.1/',
      'http://127.1/',
      'http://[::ffff:127.0.0.1]/',
      'http://[::ffff:7f00:1]/',
      'http://[0:0:0:0:0:ffff:7f00:1]/',
      'http://[::127.0.0.1]/',
      'http://[64:ff9b::7f00:1]/',
    ]) {
      expect(refusal(g, url), url).toBeDefined();
    }
  });

  it('an allow entry naming only a never-allowed destination is a settings problem', () => {
    expect(() => new OutboundGuard({ allow: ['169.254.169.254/32'] })).toThrow(/never allowed/);
    expect(() => new OutboundGuard({ allow: ['metadata.google.internal'] })).toThrow(
      /metadata service/,
    );
    expect(rulesProblems({ allow: ['0.0.0.0'] }, false)).toEqual([
      "allow: '0.0.0.0' is a metadata or unspecified address, which is never allowed",
    ]);
    expect(
      rulesProblems(
        { allow: ['10.0.0.0/33', 'exa mple.com', '*.-x'], deny: ['2130706433.x.1'] },
        false,
      ),
    ).toHaveLength(4);
    expect(
      rulesProblems({ allow: ['10.0.0.0/8', '*.svc.cluster.local', 'a.b:8443', '[::1]:9'] }, false),
    ).toEqual([]);
  });

  it('deny entries win over allow entries and also apply to public addresses', () => {
    const g = guard({
      allow: ['10.0.0.0/8', '*.svc.cluster.local'],
      deny: ['10.0.5.0/24', '*.kube-system.svc.cluster.local', '203.0.113.0/24', 'evil.example'],
    });
    expect(refusal(g, 'http://10.0.5.1/')).toMatch(/denied by the cluster outbound policy/);
    expect(refusal(g, 'http://10.0.6.1/')).toBeUndefined();
    expect(refusal(g, 'http://dns.kube-system.svc.cluster.local/')).toMatch(/denied/);
    expect(refusal(g, 'http://203.0.113.9/')).toMatch(/denied/);
    expect(refusal(g, 'https://EVIL.example./')).toMatch(/denied/);
    expect(refusal(g, 'https://example.com/')).toBeUndefined();
  });
});

describe('narrowing: namespaces and workflows', () => {
  const cluster: OutboundGuardOptions = {
    allow: ['10.0.0.0/8', '*.svc.cluster.local'],
    namespaces: { payments: { allow: ['*.payments.svc.cluster.local', 'api.stripe.com'] } },
  };

  it('a workflow deny refuses what the cluster allows', () => {
    const g = guard(cluster);
    const scope = g.forWorkflow(workflow('shop', { deny: ['10.0.7.0/24'] }));
    expect(refusal(g, 'http://10.0.7.1/')).toBeUndefined();
    expect(refusal(scope, 'http://10.0.7.1/')).toMatch(/denied by the workflow's outbound policy/);
    expect(refusal(scope, 'http://10.0.8.1/')).toBeUndefined();
  });

  it('a workflow allow list restricts to its entries, public ones included', () => {
    const g = guard(cluster);
    const scope = g.forWorkflow(workflow('shop', { allow: ['10.0.1.0/24', 'hooks.example.com'] }));
    expect(refusal(scope, 'http://10.0.1.5/')).toBeUndefined();
    expect(refusal(scope, 'https://hooks.example.com/')).toBeUndefined();
    expect(refusal(scope, 'http://10.0.2.5/')).toMatch(
      /not in the workflow's outbound policy's allow list/,
    );
    expect(refusal(scope, 'http://93.184.216.34/')).toMatch(/allow list/);
  });

  it('a workflow cannot widen the cluster policy', () => {
    const g = guard(cluster);
    const scope = g.forWorkflow(
      workflow('shop', { allow: ['192.168.0.0/16', '127.0.0.1', '169.254.169.254', '*.internal'] }),
    );
    expect(refusal(scope, 'http://192.168.1.1/')).toMatch(/cluster outbound policy does not allow/);
    expect(refusal(scope, 'http://127.0.0.1/')).toMatch(/loopback/);
    expect(refusal(scope, 'http://169.254.169.254/')).toMatch(/never allowed/);
  });

  it('a namespace policy narrows every workflow of the namespace, and a workflow narrows it further', async () => {
    const g = guard({
      ...cluster,
      lookup: stubLookup({
        'ledger.payments.svc.cluster.local': ['10.0.3.3'],
        'other.shop.svc.cluster.local': ['10.0.4.4'],
      }),
    });
    const payments = g.forWorkflow(workflow('payments'));
    expect(refusal(payments, 'https://api.stripe.com/')).toBeUndefined();
    expect(refusal(payments, 'https://example.com/')).toMatch(
      /host example\.com is not in the outbound policy of namespace payments's allow list/,
    );
    const send = (t: OutboundTarget, url: string) =>
      sendOutbound(t, { method: 'GET', url, timeoutMs: 2000, protocols: ['http:'] });
    await expect(send(payments, 'http://other.shop.svc.cluster.local:1/')).rejects.toThrow(
      /allow list/,
    );
    const narrower = g.forWorkflow(
      workflow('payments', { deny: ['*.payments.svc.cluster.local'] }),
    );
    expect(refusal(narrower, 'http://ledger.payments.svc.cluster.local/')).toMatch(/denied/);
    // Other namespaces are untouched by the payments policy.
    expect(refusal(g.forWorkflow(workflow('shop')), 'https://example.com/')).toBeUndefined();
  });

  it('an invalid workflow policy refuses everything (fails closed)', () => {
    const g = guard(cluster);
    const scope = g.forWorkflow(workflow('shop', { allow: ['10.0.0.0/99'] }));
    expect(refusal(scope, 'https://example.com/')).toMatch(/spec\.outbound is invalid/);
  });

  it('scopes are cached per effective policy and bounded', () => {
    const g = guard({ ...cluster, maxScopes: 2 });
    const a = g.forWorkflow(workflow('shop', { deny: ['10.0.0.1'] }));
    expect(g.forWorkflow(workflow('shop', { deny: ['10.0.0.1'] }))).toBe(a);
    expect(g.forWorkflow(workflow('shop'))).toBe(g.forWorkflow(workflow('other')));
    g.forWorkflow(workflow('shop', { deny: ['10.0.0.2'] }));
    g.forWorkflow(workflow('shop', { deny: ['10.0.0.3'] }));
    expect(g.scopeCount).toBe(2);
  });
});

describe('the decision is made on the address connected to', () => {
  let receiver: Receiver;
  beforeAll(async () => {
    receiver = await startReceiver(() => ({ status: 200, body: 'ok' }));
  });
  afterAll(async () => {
    await receiver.close();
  });
  const send = (t: OutboundTarget, url: string) =>
    sendOutbound(t, { method: 'GET', url, timeoutMs: 2000, protocols: ['http:'] });

  it('a host allowed by name that resolves to a denied address is refused (DNS rebinding)', async () => {
    const g = guard({
      allow: ['*.svc.cluster.local', '127.0.0.0/8'],
      deny: ['127.0.0.2/32'],
      lookup: stubLookup({
        'ok.ns.svc.cluster.local': ['127.0.0.1'],
        'rebound.ns.svc.cluster.local': ['127.0.0.2'],
        'meta.ns.svc.cluster.local': ['169.254.169.254'],
        'mapped.ns.svc.cluster.local': ['::ffff:169.254.169.254'],
      }),
    });
    const before = receiver.received.length;
    expect((await send(g, `http://ok.ns.svc.cluster.local:${receiver.port}/`)).status).toBe(200);
    await expect(send(g, `http://rebound.ns.svc.cluster.local:${receiver.port}/`)).rejects.toThrow(
      /denied by the cluster outbound policy/,
    );
    await expect(send(g, `http://meta.ns.svc.cluster.local:${receiver.port}/`)).rejects.toThrow(
      /never allowed/,
    );
    await expect(send(g, `http://mapped.ns.svc.cluster.local:${receiver.port}/`)).rejects.toThrow(
      /never allowed/,
    );
    expect(receiver.received.length - before).toBe(1);
  });

  it('a host:port entry opens that port only, also at connect time', async () => {
    const g = guard({
      allow: [`127.0.0.1:${receiver.port}`, `receiver.test:${receiver.port}`, '10.0.0.0/8'],
      lookup: stubLookup({ 'receiver.test': ['10.255.255.1'] }),
    });
    expect(refusal(g, `${receiver.url}/`)).toBeUndefined();
    expect(refusal(g, `http://127.0.0.1:${receiver.port + 1}/`)).toMatch(/loopback/);
    const ports = guard({
      allow: [`receiver.test:${receiver.port}`],
      lookup: stubLookup({ 'receiver.test': ['127.0.0.1'] }),
    });
    // A host:port entry with a name opens private addresses only: loopback is refused.
    await expect(send(ports, `http://receiver.test:${receiver.port}/`)).rejects.toThrow(/loopback/);
  });

  it('a pooled connection made under one policy is not reused under a narrower one', async () => {
    const g = guard({
      allow: ['127.0.0.0/8', '*.test'],
      lookup: stubLookup({ 'pool.test': ['127.0.0.1'] }),
    });
    const open = g.forWorkflow(workflow('shop'));
    const closed = g.forWorkflow(workflow('shop', { deny: ['127.0.0.1'] }));
    const url = `http://pool.test:${receiver.port}/`;
    expect((await send(open, url)).status).toBe(200);
    expect((await send(open, url)).status).toBe(200);
    await expect(send(closed, url)).rejects.toThrow(/denied by the workflow's outbound policy/);
  });
});
