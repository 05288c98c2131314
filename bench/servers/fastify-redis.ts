// Baseline: bare Fastify plus one Redis script per request, the least a queued
// Immediate ACK can do (the body appended to a stream, trimmed, in one round trip), so
// the gateway's CPU can be read against the floor its design sets as well as against
// bare Fastify. redis-server runs on the other core, as with the gateway target.
import Fastify from 'fastify';
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { benchRedis } from '../support.ts';

const { server: redisServer, url } = await benchRedis();

const redis = new Redis(url);
redis.defineCommand('enqueue', {
  numberOfKeys: 1,
  lua: "return redis.call('XADD', KEYS[1], 'MAXLEN', '~', '100000', '*', 'id', ARGV[1], 'body', ARGV[2])",
});
const enqueue = (
  redis as unknown as { enqueue(key: string, id: string, body: string): Promise<string> }
).enqueue.bind(redis);

const app = Fastify({ logger: false });
app.post('/webhook/*', async (request, reply) => {
  const executionId = randomUUID();
  await enqueue('bench:queue', executionId, JSON.stringify(request.body));
  return reply.code(202).send({ executionId, status: 'queued' });
});
const address = await app.listen({ port: 0, host: '127.0.0.1' });
console.log(`READY ${new URL(address).port}`);
process.on(
  'SIGTERM',
  () =>
    void app.close().then(() => {
      redis.disconnect();
      redisServer.kill('SIGTERM');
      process.exit(0);
    }),
);
