// Baseline: bare node:http answering 202 with a small JSON body.
import { createServer } from 'node:http';

const body = JSON.stringify({
  executionId: '00000000-0000-0000-0000-000000000000',
  status: 'queued',
});
const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(202, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
    });
    res.end(body);
  });
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  if (address && typeof address === 'object') console.log(`READY ${address.port}`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
