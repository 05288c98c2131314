// Each preset against signatures made as its sender documents them: the published
// example vectors of GitHub and Slack, Standard Webhooks signatures from the
// `standardwebhooks` library, Stripe and Shopify computed here from their written
// algorithms. Then every bad input: missing, malformed, truncated, wrong algorithm,
// wrong secret, expired, a body changed by one byte, a JSON body re-encoded.
import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import type { HeaderMap } from '../../runtime/gateway/security/headers.ts';
import { MemoryReplayStore } from '../../runtime/gateway/security/auth/signature/replay.ts';
import { SignatureVerifier } from '../../runtime/gateway/security/auth/signature/verify.ts';
import type { HttpProblem } from '../../runtime/errors.ts';
import { problemOf } from '../gateway-security/fixtures.ts';
import {
  githubSignature,
  hmac,
  shopifySignature,
  signedRoute,
  slackSignature,
  stripeV1,
} from './support.ts';

const NOW = 1_790_000_000; // Unix seconds of the test clock
const verifier = (now = NOW) => new SignatureVerifier({ now: () => now * 1000 });
const body = (text: string) => Buffer.from(text, 'utf8');

/** The problem's code, and that it says nothing of the expected value or the secret. */
async function refusal(
  verify: () => Promise<unknown>,
  ...secrets: string[]
): Promise<HttpProblem['code']> {
  const problem = await problemOf(verify);
  expect(problem.status).toBe(401);
  expect(problem.headers['WWW-Authenticate']).toMatch(/^WebhookSignature header="/);
  for (const secret of secrets) expect(problem.message).not.toContain(secret);
  expect(problem.message).not.toMatch(/[0-9a-f]{40}/);
  return problem.code;
}

describe('github', () => {
  // docs.github.com, "Validating webhook deliveries": the published test values.
  const secret = "It's a Secret to Everybody";
  const payload = 'Hello, World!';
  const published = 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17';
  const route = signedRoute({ preset: 'github' }, { webhook: secret });

  it('accepts the published example and names the secret that signed it', async () => {
    expect(githubSignature(secret, payload)).toBe(published); // our helper agrees with GitHub
    await expect(
      verifier().verify(route, { 'x-hub-signature-256': published }, body(payload)),
    ).resolves.toEqual({ consumer: 'webhook' });
  });

  it.each<[string, HeaderMap, string, HttpProblem['code']]>([
    ['no signature header', {}, payload, 'HG_ERR_SIGNATURE_MISSING'],
    [
      'an empty signature header',
      { 'x-hub-signature-256': ' ' },
      payload,
      'HG_ERR_SIGNATURE_MISSING',
    ],
    [
      'the legacy SHA-1 header only',
      { 'x-hub-signature': `sha1=${hmac('sha1', secret, payload).toString('hex')}` },
      payload,
      'HG_ERR_SIGNATURE_MISSING',
    ],
    [
      'a SHA-1 signature in the SHA-256 header (wrong algorithm)',
      { 'x-hub-signature-256': `sha1=${hmac('sha1', secret, payload).toString('hex')}` },
      payload,
      'HG_ERR_SIGNATURE_MALFORMED',
    ],
    [
      'a SHA-1 digest behind sha256= (wrong length)',
      { 'x-hub-signature-256': `sha256=${hmac('sha1', secret, payload).toString('hex')}` },
      payload,
      'HG_ERR_SIGNATURE_MALFORMED',
    ],
    [
      'a truncated signature',
      { 'x-hub-signature-256': published.slice(0, -2) },
      payload,
      'HG_ERR_SIGNATURE_MALFORMED',
    ],
    [
      'a signature that is not hex',
      { 'x-hub-signature-256': `${published.slice(0, -1)}g` },
      payload,
      'HG_ERR_SIGNATURE_MALFORMED',
    ],
    [
      'a signature without its prefix',
      { 'x-hub-signature-256': published.slice('sha256='.length) },
      payload,
      'HG_ERR_SIGNATURE_MALFORMED',
    ],
    [
      'the wrong secret',
      { 'x-hub-signature-256': githubSignature("It's a Secret to Nobody", payload) },
      payload,
      'HG_ERR_SIGNATURE_MISMATCH',
    ],
    [
      'a body changed by one byte',
      { 'x-hub-signature-256': published },
      'Hello, World?',
      'HG_ERR_SIGNATURE_MISMATCH',
    ],
    [
      'one flipped signature digit',
      { 'x-hub-signature-256': `${published.slice(0, -1)}6` },
      payload,
      'HG_ERR_SIGNATURE_MISMATCH',
    ],
  ])('refuses %s', async (_name, headers, text, code) => {
    expect(await refusal(() => verifier().verify(route, headers, body(text)), secret)).toBe(code);
  });

  it('a JSON body re-encoded with the same meaning fails: the raw bytes are signed', async () => {
    const sent = '{ "action": "opened",\n  "number": 1 }';
    const signature = githubSignature(secret, sent);
    const reencoded = JSON.stringify(JSON.parse(sent) as unknown);
    expect(JSON.parse(reencoded)).toEqual(JSON.parse(sent));
    await expect(
      verifier().verify(route, { 'x-hub-signature-256': signature }, body(sent)),
    ).resolves.toBeDefined();
    expect(
      await refusal(() =>
        verifier().verify(route, { 'x-hub-signature-256': signature }, body(reencoded)),
      ),
    ).toBe('HG_ERR_SIGNATURE_MISMATCH');
  });

  it('a redelivery with the same X-GitHub-Delivery id is refused', async () => {
    const v = new SignatureVerifier({ replay: new MemoryReplayStore(), now: () => NOW * 1000 });
    const headers = { 'x-hub-signature-256': published, 'x-github-delivery': 'd-1' };
    await v.verify(route, headers, body(payload));
    expect(await refusal(() => v.verify(route, headers, body(payload)))).toBe(
      'HG_ERR_SIGNATURE_REPLAYED',
    );
    // Another delivery id is another delivery.
    await v.verify(route, { ...headers, 'x-github-delivery': 'd-2' }, body(payload));
  });
});

describe('stripe', () => {
  const secret = 'whsec_test_stripe_0123456789abcdef';
  const payload = '{"id":"evt_1","object":"event","type":"payment_intent.succeeded"}';
  const route = signedRoute({ preset: 'stripe' }, { endpoint: secret });
  const header = (t: number, ...v1: string[]) =>
    ({ 'stripe-signature': [`t=${t}`, ...v1.map((s) => `v1=${s}`)].join(',') }) as HeaderMap;

  it('accepts t=…,v1=… over "<t>.<body>" with the whsec_ secret used as it is', async () => {
    await expect(
      verifier().verify(route, header(NOW, stripeV1(secret, NOW, payload)), body(payload)),
    ).resolves.toEqual({ consumer: 'endpoint' });
  });

  it('accepts when any of several v1 signatures matches (Stripe rolls secrets this way), v0 ignored', async () => {
    const good = stripeV1(secret, NOW, payload);
    const other = stripeV1('whsec_other', NOW, payload);
    const h = { 'stripe-signature': `t=${NOW},v1=${other},v1=${good},v0=${'0'.repeat(64)}` };
    await expect(verifier().verify(route, h, body(payload))).resolves.toBeDefined();
  });

  it('accepts up to the tolerance either way (300 s by default), refuses beyond', async () => {
    for (const t of [NOW - 300, NOW + 300]) {
      await expect(
        verifier().verify(route, header(t, stripeV1(secret, t, payload)), body(payload)),
      ).resolves.toBeDefined();
    }
    for (const t of [NOW - 301, NOW + 301]) {
      expect(
        await refusal(() =>
          verifier().verify(route, header(t, stripeV1(secret, t, payload)), body(payload)),
        ),
      ).toBe('HG_ERR_SIGNATURE_EXPIRED');
    }
  });

  it('honours a configured tolerance', async () => {
    const strict = signedRoute({ preset: 'stripe', toleranceSeconds: 10 }, { endpoint: secret });
    const t = NOW - 11;
    expect(
      await refusal(() =>
        verifier().verify(strict, header(t, stripeV1(secret, t, payload)), body(payload)),
      ),
    ).toBe('HG_ERR_SIGNATURE_EXPIRED');
  });

  it.each<[string, HeaderMap, HttpProblem['code']]>([
    ['no header', {}, 'HG_ERR_SIGNATURE_MISSING'],
    ['no t=', { 'stripe-signature': `v1=${'a'.repeat(64)}` }, 'HG_ERR_SIGNATURE_MALFORMED'],
    [
      'no v1=',
      { 'stripe-signature': `t=${NOW},v0=${'a'.repeat(64)}` },
      'HG_ERR_SIGNATURE_MALFORMED',
    ],
    [
      'two t=',
      { 'stripe-signature': `t=${NOW},t=${NOW},v1=${'a'.repeat(64)}` },
      'HG_ERR_SIGNATURE_MALFORMED',
    ],
    [
      'a timestamp that is not Unix seconds',
      { 'stripe-signature': `t=2026-11-23,v1=${'a'.repeat(64)}` },
      'HG_ERR_SIGNATURE_MALFORMED',
    ],
    [
      'a truncated v1',
      { 'stripe-signature': `t=${NOW},v1=${'a'.repeat(63)}` },
      'HG_ERR_SIGNATURE_MALFORMED',
    ],
    [
      'a SHA-512 v1 (wrong algorithm)',
      {
        'stripe-signature': `t=${NOW},v1=${hmac('sha512', secret, `${NOW}.${payload}`).toString('hex')}`,
      },
      'HG_ERR_SIGNATURE_MALFORMED',
    ],
    [
      'the wrong secret',
      { 'stripe-signature': `t=${NOW},v1=${stripeV1('whsec_wrong', NOW, payload)}` },
      'HG_ERR_SIGNATURE_MISMATCH',
    ],
    [
      'the signature of another timestamp',
      { 'stripe-signature': `t=${NOW},v1=${stripeV1(secret, NOW - 1, payload)}` },
      'HG_ERR_SIGNATURE_MISMATCH',
    ],
    [
      'the body alone signed (no "<t>.")',
      {
        'stripe-signature': `t=${NOW},v1=${hmac('sha256', secret, payload).toString('hex')}`,
      },
      'HG_ERR_SIGNATURE_MISMATCH',
    ],
  ])('refuses %s', async (_name, headers, code) => {
    expect(await refusal(() => verifier().verify(route, headers, body(payload)), secret)).toBe(
      code,
    );
  });

  it('a body changed by one byte fails', async () => {
    const changed = payload.replace('evt_1', 'evt_2');
    expect(
      await refusal(() =>
        verifier().verify(route, header(NOW, stripeV1(secret, NOW, payload)), body(changed)),
      ),
    ).toBe('HG_ERR_SIGNATURE_MISMATCH');
  });

  it('the same delivery twice is a replay (Stripe has no delivery id: the signature is the key)', async () => {
    const v = new SignatureVerifier({ replay: new MemoryReplayStore(), now: () => NOW * 1000 });
    const h = header(NOW, stripeV1(secret, NOW, payload));
    await v.verify(route, h, body(payload));
    expect(await refusal(() => v.verify(route, h, body(payload)))).toBe(
      'HG_ERR_SIGNATURE_REPLAYED',
    );
  });
});

describe('a replayed delivery with its signature re-encoded is still a replay', () => {
  // The replay key of a scheme without a signed id is the signature: the decoded bytes,
  // not the text, which a hex (either case) or base64 (unused trailing bits) encoding
  // lets anybody who saw one delivery vary without the secret.
  const replaying = () =>
    new SignatureVerifier({ replay: new MemoryReplayStore(), now: () => NOW * 1000 });

  it('stripe: the v1 hex in upper case', async () => {
    const secret = 'whsec_test_stripe_0123456789abcdef';
    const route = signedRoute({ preset: 'stripe' }, { endpoint: secret });
    const payload = '{"id":"evt_9"}';
    const signature = stripeV1(secret, NOW, payload);
    const v = replaying();
    await v.verify(route, { 'stripe-signature': `t=${NOW},v1=${signature}` }, body(payload));
    expect(
      await refusal(() =>
        v.verify(
          route,
          { 'stripe-signature': `t=${NOW},v1=${signature.toUpperCase()}` },
          body(payload),
        ),
      ),
    ).toBe('HG_ERR_SIGNATURE_REPLAYED');
  });

  it('slack: the v0 hex in mixed case', async () => {
    const secret = 'slack-signing-secret';
    const route = signedRoute({ preset: 'slack' }, { signing: secret });
    const payload = 'text=hello';
    const signature = slackSignature(secret, NOW, payload);
    const mixed = signature.replace(/[a-f]/, (c) => c.toUpperCase());
    expect(mixed).not.toBe(signature);
    const v = replaying();
    const ts = { 'x-slack-request-timestamp': String(NOW) };
    await v.verify(route, { ...ts, 'x-slack-signature': signature }, body(payload));
    expect(
      await refusal(() => v.verify(route, { ...ts, 'x-slack-signature': mixed }, body(payload))),
    ).toBe('HG_ERR_SIGNATURE_REPLAYED');
  });

  it('generic base64: another last character that decodes to the same bytes', async () => {
    const secret = 'generic-shared-secret';
    const route = signedRoute(
      {
        preset: 'generic',
        generic: {
          header: 'X-Signature',
          encoding: 'base64',
          signedPayload: '{timestamp}.{body}',
          timestampHeader: 'X-Timestamp',
        } as never,
      },
      { s: secret },
    );
    const payload = '{"n":1}';
    const signature = hmac('sha256', secret, `${NOW}.${payload}`).toString('base64');
    // 32 bytes are 43 base64 characters and '=': the last character carries 2 unused bits.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
    const last = alphabet.indexOf(signature[42]!);
    const variant = `${signature.slice(0, 42)}${alphabet[last ^ 1]}=`;
    expect(Buffer.from(variant, 'base64').equals(Buffer.from(signature, 'base64'))).toBe(true);
    const v = replaying();
    const ts = { 'x-timestamp': String(NOW) };
    await v.verify(route, { ...ts, 'x-signature': signature }, body(payload));
    expect(
      await refusal(() => v.verify(route, { ...ts, 'x-signature': variant }, body(payload))),
    ).toBe('HG_ERR_SIGNATURE_REPLAYED');
  });

  it('stripe, two secrets both signing (a rotation): the same delivery with one v1 dropped or the two swapped', async () => {
    // Both secrets active here and both signatures in the header: the one that matched
    // first was the replay key, so the copy keeping only the other one was new to it.
    const old = 'whsec_test_stripe_old_0123456789';
    const next = 'whsec_test_stripe_new_0123456789';
    const route = signedRoute({ preset: 'stripe' }, { old, next });
    const payload = '{"id":"evt_rotated"}';
    const a = stripeV1(old, NOW, payload);
    const b = stripeV1(next, NOW, payload);
    const v = replaying();
    await v.verify(route, { 'stripe-signature': `t=${NOW},v1=${a},v1=${b}` }, body(payload));
    for (const header of [`t=${NOW},v1=${b}`, `t=${NOW},v1=${a}`, `t=${NOW},v1=${b},v1=${a}`]) {
      expect(
        await refusal(() => v.verify(route, { 'stripe-signature': header }, body(payload))),
      ).toBe('HG_ERR_SIGNATURE_REPLAYED');
    }
    // Another delivery (another timestamp, or another body) is not one.
    await v.verify(
      route,
      { 'stripe-signature': `t=${NOW + 1},v1=${stripeV1(next, NOW + 1, payload)}` },
      body(payload),
    );
    const other = '{"id":"evt_other"}';
    await v.verify(
      route,
      { 'stripe-signature': `t=${NOW},v1=${stripeV1(next, NOW, other)}` },
      body(other),
    );
  });
});

describe('slack', () => {
  // Slack's worked example ("Verifying requests from Slack").
  const secret = '8f742231b10e8888abcd99yyyzzz85a5';
  const ts = 1531420618;
  const payload =
    'token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c';
  const published = 'v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503';
  const route = signedRoute({ preset: 'slack' }, { signing: secret });
  const headers = (signature: string, timestamp: number | string = ts): HeaderMap => ({
    'x-slack-signature': signature,
    'x-slack-request-timestamp': String(timestamp),
  });

  it('accepts the published example within 5 minutes of its timestamp', async () => {
    expect(slackSignature(secret, ts, payload)).toBe(published);
    await expect(
      verifier(ts + 299).verify(route, headers(published), body(payload)),
    ).resolves.toEqual({ consumer: 'signing' });
  });

  it.each<[string, HeaderMap, number, HttpProblem['code']]>([
    ['no timestamp header', { 'x-slack-signature': published }, ts, 'HG_ERR_SIGNATURE_MISSING'],
    [
      'no signature header',
      { 'x-slack-request-timestamp': String(ts) },
      ts,
      'HG_ERR_SIGNATURE_MISSING',
    ],
    ['the example 301 s later', headers(published), ts + 301, 'HG_ERR_SIGNATURE_EXPIRED'],
    [
      'a timestamp in milliseconds',
      headers(published, `${ts}000.5`),
      ts,
      'HG_ERR_SIGNATURE_MALFORMED',
    ],
    ['a v1= signature', headers(published.replace('v0=', 'v1=')), ts, 'HG_ERR_SIGNATURE_MALFORMED'],
    ['a truncated signature', headers(published.slice(0, 40)), ts, 'HG_ERR_SIGNATURE_MALFORMED'],
    [
      'another timestamp in the header than signed',
      headers(published, ts + 1),
      ts,
      'HG_ERR_SIGNATURE_MISMATCH',
    ],
    [
      'the wrong secret',
      headers(slackSignature('8f742231b10e8888abcd99yyyzzz85a6', ts, payload)),
      ts,
      'HG_ERR_SIGNATURE_MISMATCH',
    ],
  ])('refuses %s', async (_name, h, now, code) => {
    expect(await refusal(() => verifier(now).verify(route, h, body(payload)), secret)).toBe(code);
  });

  it('a body changed by one byte fails', async () => {
    const changed = payload.replace('text=&', 'text=x');
    expect(await refusal(() => verifier(ts).verify(route, headers(published), body(changed)))).toBe(
      'HG_ERR_SIGNATURE_MISMATCH',
    );
  });
});

describe('shopify', () => {
  const secret = 'shpss_0123456789abcdef0123456789abcdef';
  const payload = '{"id":820982911946154508,"email":"jon@example.com"}';
  const route = signedRoute({ preset: 'shopify' }, { app: secret });

  it('accepts a base64 HMAC-SHA256 of the body', async () => {
    await expect(
      verifier().verify(
        route,
        { 'x-shopify-hmac-sha256': shopifySignature(secret, payload) },
        body(payload),
      ),
    ).resolves.toEqual({ consumer: 'app' });
  });

  it.each<[string, HeaderMap, HttpProblem['code']]>([
    ['no header', {}, 'HG_ERR_SIGNATURE_MISSING'],
    [
      'a hex signature (wrong encoding)',
      { 'x-shopify-hmac-sha256': hmac('sha256', secret, payload).toString('hex') },
      'HG_ERR_SIGNATURE_MALFORMED',
    ],
    [
      'truncated base64',
      { 'x-shopify-hmac-sha256': shopifySignature(secret, payload).slice(0, -4) },
      'HG_ERR_SIGNATURE_MALFORMED',
    ],
    [
      'a SHA-1 digest (wrong algorithm)',
      { 'x-shopify-hmac-sha256': hmac('sha1', secret, payload).toString('base64') },
      'HG_ERR_SIGNATURE_MALFORMED',
    ],
    [
      'the wrong secret',
      { 'x-shopify-hmac-sha256': shopifySignature('shpss_wrong', payload) },
      'HG_ERR_SIGNATURE_MISMATCH',
    ],
    [
      'the signature of a body changed by one byte',
      { 'x-shopify-hmac-sha256': shopifySignature(secret, payload.replace('jon', 'jan')) },
      'HG_ERR_SIGNATURE_MISMATCH',
    ],
  ])('refuses %s', async (_name, h, code) => {
    expect(await refusal(() => verifier().verify(route, h, body(payload)), secret)).toBe(code);
  });

  it('the same X-Shopify-Webhook-Id twice is a replay', async () => {
    const v = new SignatureVerifier({ replay: new MemoryReplayStore(), now: () => NOW * 1000 });
    const h = {
      'x-shopify-hmac-sha256': shopifySignature(secret, payload),
      'x-shopify-webhook-id': 'b54557e4-bdd9-4b37-8a5f-bf7d70bcd043',
    };
    await v.verify(route, h, body(payload));
    expect(await refusal(() => v.verify(route, h, body(payload)))).toBe(
      'HG_ERR_SIGNATURE_REPLAYED',
    );
  });
});

describe('standardWebhooks (signatures from the standardwebhooks library)', () => {
  const secret = `whsec_${randomBytes(24).toString('base64')}`;
  const sender = new Webhook(secret);
  const payload = '{"type":"invoice.paid","data":{"id":"inv_1"}}';
  const route = signedRoute({ preset: 'standardWebhooks' }, { current: secret });
  const signed = (id: string, at: number, text = payload, by = sender): HeaderMap => ({
    'webhook-id': id,
    'webhook-timestamp': String(at),
    'webhook-signature': by.sign(id, new Date(at * 1000), text),
  });

  it('accepts what the library signs, and the library accepts the same delivery', async () => {
    const now = Math.floor(Date.now() / 1000);
    const headers = signed('msg_1', now);
    await expect(verifier(now).verify(route, headers, body(payload))).resolves.toEqual({
      consumer: 'current',
    });
    expect(sender.verify(payload, headers as Record<string, string>)).toEqual(JSON.parse(payload));
  });

  it('accepts a header with several signatures (v1a and unknown versions skipped)', async () => {
    const other = new Webhook(`whsec_${randomBytes(24).toString('base64')}`);
    const mine = signed('msg_2', NOW)['webhook-signature'] as string;
    const theirs = other.sign('msg_2', new Date(NOW * 1000), payload);
    const headers = {
      ...signed('msg_2', NOW),
      'webhook-signature': `${theirs} v1a,${'A'.repeat(86)}== v2,xyz ${mine}`,
    };
    await expect(verifier().verify(route, headers, body(payload))).resolves.toBeDefined();
  });

  it('rotation: deliveries signed with the old or the new secret are both accepted', async () => {
    const old = `whsec_${randomBytes(32).toString('base64')}`;
    const rotated = signedRoute(
      { preset: 'standardWebhooks', secretRef: { name: 's', keys: ['current', 'previous'] } },
      { current: secret, previous: old },
    );
    await expect(verifier().verify(rotated, signed('msg_3', NOW), body(payload))).resolves.toEqual({
      consumer: 'current',
    });
    await expect(
      verifier().verify(rotated, signed('msg_4', NOW, payload, new Webhook(old)), body(payload)),
    ).resolves.toEqual({ consumer: 'previous' });
  });

  it.each<[string, (h: HeaderMap) => HeaderMap, HttpProblem['code']]>([
    ['no webhook-id', ({ 'webhook-id': _, ...h }) => h, 'HG_ERR_SIGNATURE_MISSING'],
    ['no webhook-timestamp', ({ 'webhook-timestamp': _, ...h }) => h, 'HG_ERR_SIGNATURE_MISSING'],
    ['no webhook-signature', ({ 'webhook-signature': _, ...h }) => h, 'HG_ERR_SIGNATURE_MISSING'],
    [
      'no v1 signature',
      (h) => ({ ...h, 'webhook-signature': String(h['webhook-signature']).replace('v1,', 'v0,') }),
      'HG_ERR_SIGNATURE_MALFORMED',
    ],
    [
      'a truncated signature',
      (h) => ({ ...h, 'webhook-signature': String(h['webhook-signature']).slice(0, -6) }),
      'HG_ERR_SIGNATURE_MALFORMED',
    ],
    [
      'another id than signed',
      (h) => ({ ...h, 'webhook-id': 'msg_other' }),
      'HG_ERR_SIGNATURE_MISMATCH',
    ],
    [
      'another timestamp than signed',
      (h) => ({ ...h, 'webhook-timestamp': String(NOW + 1) }),
      'HG_ERR_SIGNATURE_MISMATCH',
    ],
  ])('refuses %s', async (_name, change, code) => {
    expect(
      await refusal(() => verifier().verify(route, change(signed('msg_5', NOW)), body(payload))),
    ).toBe(code);
  });

  it('refuses a delivery 5 minutes and a second old, or as far in the future', async () => {
    for (const at of [NOW - 301, NOW + 301]) {
      expect(
        await refusal(() => verifier().verify(route, signed('msg_6', at), body(payload))),
      ).toBe('HG_ERR_SIGNATURE_EXPIRED');
    }
  });

  it('refuses the wrong secret, and the right secret used without base64-decoding it', async () => {
    const wrong = new Webhook(`whsec_${randomBytes(24).toString('base64')}`);
    expect(
      await refusal(() =>
        verifier().verify(route, signed('msg_7', NOW, payload, wrong), body(payload)),
      ),
    ).toBe('HG_ERR_SIGNATURE_MISMATCH');
    const raw = hmac('sha256', secret, `msg_7.${NOW}.${payload}`).toString('base64');
    expect(
      await refusal(() =>
        verifier().verify(
          route,
          { ...signed('msg_7', NOW), 'webhook-signature': `v1,${raw}` },
          body(payload),
        ),
      ),
    ).toBe('HG_ERR_SIGNATURE_MISMATCH');
  });

  it('a body changed by one byte, or re-encoded JSON, fails', async () => {
    const headers = signed('msg_8', NOW);
    for (const changed of [
      payload.replace('inv_1', 'inv_2'),
      JSON.stringify(JSON.parse(payload), null, 1),
    ]) {
      expect(await refusal(() => verifier().verify(route, headers, body(changed)))).toBe(
        'HG_ERR_SIGNATURE_MISMATCH',
      );
    }
  });

  it('the same webhook-id twice is a replay; the library itself accepts both', async () => {
    const v = new SignatureVerifier({ replay: new MemoryReplayStore(), now: () => NOW * 1000 });
    const first = signed('msg_9', NOW);
    await v.verify(route, first, body(payload));
    // A new attempt re-signs with a new timestamp; the id says it is the same delivery.
    const again = signed('msg_9', NOW + 5);
    expect(await refusal(() => v.verify(route, again, body(payload)))).toBe(
      'HG_ERR_SIGNATURE_REPLAYED',
    );
  });
});

describe('generic', () => {
  const secret = 'generic-shared-secret';

  it('hex HMAC-SHA256 of the body by default', async () => {
    const route = signedRoute(
      { preset: 'generic', generic: { header: 'X-Signature' } as never },
      { s: secret },
    );
    const payload = '{"n":1}';
    await expect(
      verifier().verify(
        route,
        { 'x-signature': hmac('sha256', secret, payload).toString('hex') },
        body(payload),
      ),
    ).resolves.toEqual({ consumer: 's' });
  });

  it.each(['sha1', 'sha256', 'sha512'] as const)(
    '%s, base64, a prefix and a template of id, timestamp and body',
    async (algorithm) => {
      const route = signedRoute(
        {
          preset: 'generic',
          generic: {
            header: 'X-Acme-Signature',
            algorithm,
            encoding: 'base64',
            prefix: 'v1=',
            signedPayload: 'v1:{id}:{timestamp}:{body}',
            timestampHeader: 'X-Acme-Timestamp',
            idHeader: 'X-Acme-Delivery',
          },
        },
        { s: secret },
      );
      const payload = 'a=1&b=2';
      const signature = hmac(algorithm, secret, `v1:d-1:${NOW}:${payload}`).toString('base64');
      const headers = {
        'x-acme-signature': `v1=${signature}`,
        'x-acme-timestamp': String(NOW),
        'x-acme-delivery': 'd-1',
      };
      await expect(verifier().verify(route, headers, body(payload))).resolves.toBeDefined();
      const other = algorithm === 'sha512' ? 'sha256' : 'sha512';
      const wrongAlgorithm = hmac(other, secret, `v1:d-1:${NOW}:${payload}`).toString('base64');
      expect(
        await refusal(() =>
          verifier().verify(
            route,
            { ...headers, 'x-acme-signature': `v1=${wrongAlgorithm}` },
            body(payload),
          ),
        ),
      ).toBe('HG_ERR_SIGNATURE_MALFORMED');
      expect(await refusal(() => verifier(NOW + 301).verify(route, headers, body(payload)))).toBe(
        'HG_ERR_SIGNATURE_EXPIRED',
      );
      expect(
        await refusal(() =>
          verifier().verify(route, { ...headers, 'x-acme-delivery': 'd-2' }, body(payload)),
        ),
      ).toBe('HG_ERR_SIGNATURE_MISMATCH');
    },
  );

  it('no active secret that matches: a Secret with keys for other triggers does not help', async () => {
    const route = signedRoute({ preset: 'github' }, { a: 'one', b: 'two' });
    expect(
      await refusal(() =>
        verifier().verify(
          route,
          { 'x-hub-signature-256': githubSignature('three', 'x') },
          body('x'),
        ),
      ),
    ).toBe('HG_ERR_SIGNATURE_MISMATCH');
  });
});

describe('checkHeaders: what the headers alone show, before the body is read', () => {
  const hex = '0'.repeat(64);
  const b64 = Buffer.alloc(32).toString('base64');
  const stale = String(NOW - 301);
  type Case = {
    route: ReturnType<typeof signedRoute>;
    /** Well-formed and timely (the signature itself is wrong: no HMAC is computed). */
    good: HeaderMap;
    malformed: HeaderMap;
    /** Timestamped schemes: the same with a timestamp 301 s old. */
    stale?: HeaderMap;
  };
  const cases: Record<string, Case> = {
    github: {
      route: signedRoute({ preset: 'github' }, { s: 'x' }),
      good: { 'x-hub-signature-256': `sha256=${hex}` },
      malformed: { 'x-hub-signature-256': `sha1=${hex}` },
    },
    stripe: {
      route: signedRoute({ preset: 'stripe' }, { s: 'x' }),
      good: { 'stripe-signature': `t=${NOW},v1=${hex}` },
      malformed: { 'stripe-signature': `v1=${hex}` },
      stale: { 'stripe-signature': `t=${stale},v1=${hex}` },
    },
    slack: {
      route: signedRoute({ preset: 'slack' }, { s: 'x' }),
      good: { 'x-slack-signature': `v0=${hex}`, 'x-slack-request-timestamp': String(NOW) },
      malformed: { 'x-slack-signature': hex, 'x-slack-request-timestamp': String(NOW) },
      stale: { 'x-slack-signature': `v0=${hex}`, 'x-slack-request-timestamp': stale },
    },
    shopify: {
      route: signedRoute({ preset: 'shopify' }, { s: 'x' }),
      good: { 'x-shopify-hmac-sha256': b64 },
      malformed: { 'x-shopify-hmac-sha256': 'not base64!' },
    },
    standardWebhooks: {
      route: signedRoute(
        { preset: 'standardWebhooks' },
        { s: `whsec_${randomBytes(24).toString('base64')}` },
      ),
      good: {
        'webhook-id': 'msg_1',
        'webhook-timestamp': String(NOW),
        'webhook-signature': `v1,${b64}`,
      },
      malformed: {
        'webhook-id': 'msg_1',
        'webhook-timestamp': String(NOW),
        'webhook-signature': `v2,${b64}`,
      },
      stale: {
        'webhook-id': 'msg_1',
        'webhook-timestamp': stale,
        'webhook-signature': `v1,${b64}`,
      },
    },
    generic: {
      route: signedRoute(
        {
          preset: 'generic',
          generic: {
            header: 'X-Acme-Signature',
            algorithm: 'sha256',
            encoding: 'base64',
            prefix: 'v1=',
            signedPayload: '{timestamp}.{body}',
            timestampHeader: 'X-Acme-Timestamp',
          },
        },
        { s: 'x' },
      ),
      good: { 'x-acme-signature': `v1=${b64}`, 'x-acme-timestamp': String(NOW) },
      malformed: { 'x-acme-signature': `v1=${hex}`, 'x-acme-timestamp': String(NOW) },
      stale: { 'x-acme-signature': `v1=${b64}`, 'x-acme-timestamp': stale },
    },
  };

  it.each(Object.entries(cases))(
    '%s: the same 401 as verify() gives, no body needed',
    async (_preset, c) => {
      const v = verifier();
      const code = async (headers: HeaderMap) => {
        const early = await refusal(() => Promise.resolve(v.checkHeaders(c.route, headers)));
        // verify() on the whole delivery refuses it the same way.
        expect(await refusal(() => v.verify(c.route, headers, body('{}')))).toBe(early);
        return early;
      };
      expect(() => v.checkHeaders(c.route, c.good)).not.toThrow();
      expect(await code({})).toBe('HG_ERR_SIGNATURE_MISSING');
      expect(await code(c.malformed)).toBe('HG_ERR_SIGNATURE_MALFORMED');
      if (c.stale) expect(await code(c.stale)).toBe('HG_ERR_SIGNATURE_EXPIRED');
      // The HMAC is the body's business: a well-formed, timely header passes here, and
      // verify() refuses it for its signature.
      expect(await refusal(() => v.verify(c.route, c.good, body('{}')))).toBe(
        'HG_ERR_SIGNATURE_MISMATCH',
      );
    },
  );
});
