/**
 * Static checks as tests so CI enforces them: strict typecheck and lint (no-floating-promises, workflow import
 * bans). tsc and eslint are single-threaded and independent, so both start when this file loads and run side
 * by side on two cores; one eslint pass over the project also lints a probe file that must break the workflow
 * import ban (a type-aware eslint run costs about a minute, so the probe does not get a run of its own).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { runProcess } from './helpers/run-process';

const root = path.resolve(__dirname, '..');
const bin = (name: string) => path.join(root, 'node_modules', '.bin', name);

const run = (cmd: string, args: string[]) => runProcess(cmd, args, { cwd: root });

// A real file (the type-aware parser only lints files on disk) that imports what workflow files must not.
const probeFile = path.join(root, 'workflows', '__lint_probe__.ts');
const probeRelative = path.relative(root, probeFile);
fs.writeFileSync(
  probeFile,
  "import fs from 'node:fs';\nimport * as ort from 'onnxruntime-node';\nimport { Client } from 'minio';\nexport const probe = [fs, ort, Client];\n"
);
const removeProbe = () => fs.rmSync(probeFile, { force: true });
process.on('exit', removeProbe);

// tsc reads its file list from tsconfig.json; the probe is valid TypeScript, so it cannot fail tsc.
const tsc = run(bin('tsc'), ['--noEmit', '-p', root]);
const eslint = run(bin('eslint'), ['--format', 'json', '.']).finally(removeProbe);

interface LintMessage {
  ruleId: string | null;
  /** 1 = warning, 2 = error; eslint's exit code counts errors only. */
  severity: number;
  message: string;
  line: number;
}
interface LintResult {
  filePath: string;
  messages: LintMessage[];
}

async function lintResults(): Promise<LintResult[]> {
  const r = await eslint;
  const start = r.output.indexOf('[');
  try {
    return JSON.parse(r.output.slice(start)) as LintResult[];
  } catch {
    throw new Error(`eslint printed no JSON report (exit ${r.code}):\n${r.output.slice(0, 5000)}`);
  }
}

test('tsc --noEmit passes (strict, noUncheckedIndexedAccess)', async () => {
  const r = await tsc;
  assert.equal(r.code, 0, `tsc errors:\n${r.output}`);
});

test('eslint passes', async () => {
  const results = await lintResults();
  const problems = results
    .filter((f) => path.relative(root, f.filePath) !== probeRelative)
    .flatMap((f) =>
      f.messages
        .filter((m) => m.severity === 2)
        .map((m) => `${path.relative(root, f.filePath)}:${m.line} ${m.ruleId ?? ''} ${m.message}`)
    );
  assert.deepEqual(problems, [], `eslint errors:\n${problems.join('\n')}`);
  assert.ok(results.length > 100, `eslint linted the project (${results.length} files)`);
});

test('the lint rule keeps Node modules, onnxruntime and minio out of workflow files', async () => {
  const results = await lintResults();
  const probe = results.find((f) => path.relative(root, f.filePath) === probeRelative);
  assert.ok(probe, 'eslint linted the probe file');
  const restricted = probe.messages.filter((m) => m.ruleId === 'no-restricted-imports');
  assert.equal(restricted.length, 3, `one error per forbidden import:\n${JSON.stringify(probe.messages, null, 1)}`);
  for (const what of ['node:fs', 'onnxruntime-node', 'minio'])
    assert.ok(
      restricted.some((m) => m.message.includes(`'${what}'`)),
      what
    );
});
