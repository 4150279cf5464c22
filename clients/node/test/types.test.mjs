// index.d.ts matches how a TypeScript program uses the package:
// `tsc --noEmit` (strict) on test/types/usage.ts, which imports 'delayq'.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { promisify } from 'node:util';
import { clientDir } from './support/servers.mjs';

test('tsc --noEmit accepts test/types/usage.ts against index.d.ts', { timeout: 60_000 }, async () => {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const project = path.join(clientDir, 'test/types/tsconfig.json');
  const { stdout, stderr } = await promisify(execFile)(process.execPath, [tsc, '-p', project], { cwd: clientDir })
    .catch(e => assert.fail(`tsc failed:\n${e.stdout}${e.stderr}`));
  assert.equal(stdout + stderr, '');
});
