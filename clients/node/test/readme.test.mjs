// The README's first screen, as a newcomer follows it: `npm install
// <clients/node>` in a scratch project, then its first example saved as
// app.mjs and run against a server, stopped with SIGINT (Ctrl-C).
// (Its `npm ci` line is what the tests need anyway: checked, not re-run,
// so as not to replace node_modules under the other test files.)
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client } from '../index.js';
import { clientDir, poll, spawnCapturing, startDelayq, tempDir } from './support/servers.mjs';

const readme = readFileSync(path.join(clientDir, 'README.md'), 'utf8');
const blocks = lang => [...readme.matchAll(new RegExp('```' + lang + '\\n([\\s\\S]*?)```', 'g'))].map(m => m[1]);

let server;
let scratch;
before(async () => {
  server = await startDelayq();
  scratch = tempDir('delayq-node-readme-');
});
after(async () => {
  await server.stop();
  scratch.remove();
});

test("the README's install and first example work as written", { timeout: 60_000 }, async () => {
  const install = blocks('sh')[0].split('\n');
  assert.ok(install.some(l => l.startsWith('(cd clients/node && npm ci)')), 'the README installs the dependencies with npm ci');
  const pkg = JSON.parse(readFileSync(path.join(clientDir, 'package.json'), 'utf8'));
  const ioredis = createRequire(path.join(clientDir, 'index.js'))('ioredis/package.json');
  assert.equal(ioredis.version, pkg.dependencies.ioredis, 'npm ci has been run in clients/node');

  const npmLine = install.find(l => l.startsWith('npm install /path/to/delayq/clients/node'));
  assert.ok(npmLine, 'the README says how to install the package');
  const args = npmLine.split('#')[0].trim().split(/\s+/).slice(1).map(a => a.replace('/path/to/delayq/clients/node', clientDir));
  await promisify(execFile)('npm', [...args, '--no-audit', '--no-fund'], { cwd: scratch.dir, timeout: 50_000 });

  const app = blocks('js')[0];
  assert.match(app, /from 'delayq'/);
  writeFileSync(path.join(scratch.dir, 'app.mjs'), app);
  const { child, out, err, exited } = spawnCapturing(process.execPath, ['app.mjs'], {
    cwd: scratch.dir,
    env: { ...process.env, DELAYQ_SERVER: server.address },
  });
  try {
    await poll(() => out().includes('closing order 42 (attempt 1)\n'), 10_000, `the job to be handled (stderr: ${err()})`);
    // the finish lands: the job is gone
    const client = new Client({ servers: server.address });
    await poll(async () => (await client.stats()).finished === 1, 5000, 'the finish');
    await client.close();
  } finally {
    child.kill('SIGINT');
  }
  const [code, signal] = await exited;
  assert.deepEqual([code, signal], [0, null], err());
  assert.equal(err(), '');
});
