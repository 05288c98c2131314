// Baseline: bare Fastify, one route answering 202 with a small JSON body (JSON parsed).
import Fastify from 'fastify';
import { randomUUID } from 'node:crypto';

const app = Fastify({ logger: false });
app.post('/webhook/*', (_request, reply) =>
  reply.code(202).send({ executionId: randomUUID(), status: 'queued' }),
);
const address = await app.listen({ port: 0, host: '127.0.0.1' });
console.log(`READY ${new URL(address).port}`);
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
