// Micro-benchmark of the input-limit scan (runtime/gateway/body/input-limits.ts): the
// cost per KiB of checkJsonLimits() over typical webhook JSON, next to the decoding
// and JSON.parse every JSON body pays anyway.
//
//   node bench/input-limits.ts
import { checkJsonLimits, DEFAULT_INPUT_LIMITS } from '../runtime/gateway/body/input-limits.ts';

const event = {
  id: 'evt_1NqA2b',
  type: 'order.created',
  data: {
    orderId: 'A-1001',
    total: 129.5,
    currency: 'EUR',
    items: [
      { sku: 'X-1', qty: 2, price: 1.5e2 },
      { sku: 'Y-2', qty: 1, price: 3 },
    ],
    customer: { name: 'Zoë Müller', email: 'z@example.com', tags: ['a', 'b', 'c'] },
  },
  note: 'say "hi" \\ there',
};

function body(kib: number): Buffer {
  const items: unknown[] = [];
  let text = '';
  while (text.length < kib * 1024) {
    items.push(event);
    text = JSON.stringify(items);
  }
  return Buffer.from(text);
}

function nsPer(run: () => void, n: number): number {
  for (let i = 0; i < n / 10; i++) run();
  const started = process.hrtime.bigint();
  for (let i = 0; i < n; i++) run();
  return Number(process.hrtime.bigint() - started) / n;
}

for (const kib of [1, 16, 256]) {
  const bytes = body(kib);
  const size = bytes.length / 1024;
  const n = Math.max(200, Math.floor(200_000 / size));
  const scan = nsPer(() => checkJsonLimits(bytes, DEFAULT_INPUT_LIMITS), n);
  const parse = nsPer(() => JSON.parse(bytes.toString('utf8')) as unknown, n);
  console.log(
    `${size.toFixed(1).padStart(6)} KiB: scan ${(scan / size).toFixed(0).padStart(5)} ns/KiB, ` +
      `decode + JSON.parse ${(parse / size).toFixed(0).padStart(5)} ns/KiB ` +
      `(scan = ${((scan / parse) * 100).toFixed(0)} %)`,
  );
}
