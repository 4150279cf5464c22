// Closes orders: handles DELAYQ_TOPIC (default orders.close) with 4 handlers
// at once and prints "done <id>" once the server has accepted a job's
// finish. SIGTERM or SIGINT: stops with a 30 s drain, then exits 0.
//
//   DELAYQ_SERVER=127.0.0.1:7701 node clients/node/examples/worker.mjs
import { Client, Worker } from 'delayq';

const client = new Client();  // DELAYQ_SERVER (a,b,...) and DELAYQ_AUTH_TOKEN
const worker = new Worker(client, {
  concurrency: 4,
  onAcknowledged(job, kind, error) {
    if (kind === 'finish' && error === null) process.stdout.write(`done ${job.id}\n`);
  },
  onError: error => console.error(`delayq: ${error.message}`),
});

worker.handle(process.env.DELAYQ_TOPIC || 'orders.close', async job => {
  // Close the order in job.json() here. Throw to retry it later (with backoff).
});

await worker.run({ drain: '30s' });  // until SIGTERM or SIGINT, then drains
await client.close();
