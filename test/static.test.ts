/** Static checks as tests so CI enforces them: strict typecheck and lint (no-floating-promises, workflow import bans). */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

const root = path.resolve(__dirname, '..');
const bin = (name: string) => path.join(root, 'node_modules', '.bin', name);

test('tsc --noEmit passes (strict, noUncheckedIndexedAccess)', () => {
  const r = spawnSync(bin('tsc'), ['--noEmit', '-p', root], { cwd: root, encoding: 'utf8' });
  assert.equal(r.status, 0, `tsc errors:\n${r.stdout}${r.stderr}`);
});

test('eslint passes', () => {
  const r = spawnSync(bin('eslint'), ['.'], { cwd: root, encoding: 'utf8' });
  assert.equal(r.status, 0, `eslint errors:\n${r.stdout}${r.stderr}`);
});

test('the lint rule keeps Node modules, onnxruntime and minio out of workflow files', () => {
  // A real file (the type-aware parser only lints files on disk), removed again in every case.
  const probeFile = path.join(root, 'workflows', '__lint_probe__.ts');
  const probe =
    "import fs from 'node:fs';\nimport * as ort from 'onnxruntime-node';\nimport { Client } from 'minio';\nexport const x = [fs, ort, Client];\n";
  fs.writeFileSync(probeFile, probe);
  try {
    const r = spawnSync(bin('eslint'), [probeFile], { cwd: root, encoding: 'utf8' });
    assert.notEqual(r.status, 0, 'the probe must fail lint');
    const restricted = r.stdout.split('\n').filter((l) => l.includes('no-restricted-imports'));
    assert.equal(restricted.length, 3, `one error per forbidden import:\n${r.stdout}`);
    for (const what of ['node:fs', 'onnxruntime-node', 'minio'])
      assert.ok(
        restricted.some((l) => l.includes(`'${what}'`)),
        what
      );
  } finally {
    fs.rmSync(probeFile, { force: true });
  }
});
