/**
 * The soak's deploy source: 'auto' picks the commit before the newest change to workflows/, exports it
 * with its own files (not this checkout's), links node_modules and lists the workflow files that differ.
 * Runs against a throwaway git repository, so it does not depend on this checkout's history or depth.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { exportDeploySource } from '../../bench/lib/soak-deploy';

function repoWithHistory(): { root: string; revs: string[] } {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-deploy-src-'));
  const git = (...args: string[]) =>
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd: root, encoding: 'utf8' }).trim();
  git('init', '-q');
  const commit = (files: Record<string, string>, msg: string): string => {
    for (const [f, body] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(root, f)), { recursive: true });
      fs.writeFileSync(path.join(root, f), body);
    }
    git('add', '-A');
    git('commit', '-q', '-m', msg);
    return git('rev-parse', 'HEAD');
  };
  fs.mkdirSync(path.join(root, 'node_modules'));
  fs.writeFileSync(path.join(root, '.gitignore'), 'node_modules/\n');
  const a = commit({ 'workflows/campaign.ts': 'export const v = 1;\n', 'README.md': 'a\n' }, 'a');
  const b = commit(
    { 'workflows/campaign.ts': 'export const v = 2;\n', 'workflows/new.ts': 'export const n = 1;\n' },
    'b: workflow change'
  );
  const c = commit({ 'README.md': 'c\n' }, 'c: docs only');
  return { root, revs: [a, b, c] };
}

test('exportDeploySource auto: HEAD with the workflows/ of the parent of the newest workflow change', () => {
  const { root, revs } = repoWithHistory();
  const [a, , c] = revs as [string, string, string];
  fs.writeFileSync(path.join(root, 'notes.txt'), 'an untracked file is not a local edit of the build\n');
  const src = exportDeploySource(root, 'auto');
  assert.ok(src);
  try {
    assert.equal(src.fromRev, a);
    assert.equal(src.toRev, c);
    assert.equal(src.dirty, false);
    assert.deepEqual(src.changedWorkflowFiles, ['workflows/campaign.ts', 'workflows/new.ts']);
    // the old workflow code, without the file added later; everything else as committed at HEAD
    assert.equal(fs.readFileSync(path.join(src.root, 'workflows/campaign.ts'), 'utf8'), 'export const v = 1;\n');
    assert.equal(fs.existsSync(path.join(src.root, 'workflows/new.ts')), false);
    assert.equal(fs.readFileSync(path.join(src.root, 'README.md'), 'utf8'), 'c\n');
    assert.equal(fs.existsSync(path.join(src.root, 'notes.txt')), false);
    assert.equal(
      fs.realpathSync(path.join(src.root, 'node_modules')),
      fs.realpathSync(path.join(root, 'node_modules'))
    );
  } finally {
    src.remove();
  }
  assert.equal(fs.existsSync(src.root), false);
});

test('exportDeploySource: an explicit revision, local edits noted, none, and a bad revision', () => {
  const { root, revs } = repoWithHistory();
  fs.writeFileSync(path.join(root, 'README.md'), 'edited\n');
  const src = exportDeploySource(root, revs[1]!);
  assert.ok(src);
  try {
    assert.equal(src.fromRev, revs[1]);
    assert.deepEqual(src.changedWorkflowFiles, []);
    assert.equal(src.dirty, true);
  } finally {
    src.remove();
  }
  assert.equal(exportDeploySource(root, 'none'), undefined);
  assert.throws(() => exportDeploySource(root, 'no-such-rev'));
  const plain = fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-no-git-'));
  assert.throws(() => exportDeploySource(plain, 'auto'), /is not a git checkout; pass --deploy-from none/);
});
