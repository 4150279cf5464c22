// examples/worker.mjs as the cross-language test runs it: jobs added, every
// `done <id>` awaited (nothing else on stdout), SIGTERM, exit code 0.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { Client } from '../index.js';
import { clientDir, poll, spawnCapturing, startDelayq } from './support/servers.mjs';

let server;
before(async () => { server = await startDelayq(); });
after(async () => { await server.stop(); });

for (const signal of ['SIGTERM', 'SIGINT']) {
  test(`examples/worker.mjs prints done <id> per finished job and exits 0 on ${signal}`, async () => {
    const topic = `node.example.${signal.toLowerCase()}`;
    const { child, out, err, exited } = spawnCapturing(process.execPath, [path.join(clientDir, 'examples/worker.mjs')], {
      env: { ...process.env, DELAYQ_SERVER: server.address, DELAYQ_TOPIC: topic },
    });
    const client = new Client({ servers: server.address });
    try {
      const ids = [];
      for (let i = 0; i < 10; i++) ids.push((await client.add(topic, { order: i })).id);
      const want = ids.map(id => `done ${id}`).sort();
      await poll(() => out().split('\n').filter(Boolean).length >= ids.length, 10_000, `ten done lines (stderr: ${err()})`);
      assert.deepEqual(out().split('\n').filter(Boolean).sort(), want);
      assert.ok(out().endsWith('\n'));
    } finally {
      child.kill(signal);
      await client.close();
    }
    const [code, sig] = await exited;
    assert.deepEqual([code, sig], [0, null], err());
  });
}
