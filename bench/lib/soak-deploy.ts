/**
 * The soak's deploy of changed code (issue 12, deliverable 5): the first orchestrator build runs this
 * checkout's code with the workflow code (workflows/) of an older commit, and the deploy cuts over to
 * this checkout. By default the older commit is the parent of the newest commit that changed workflows/,
 * so the running campaign's histories were written by workflow code that differs from the code that then
 * replays them (patch discipline under test, not only a new build id).
 *
 * Only workflows/ is old: the other roles run this checkout, and a whole older build would not work with
 * them when anything they share changed (measured: an older orchestrator wrote a v0 checkpoint of the
 * older policy architecture, which the newer policy servers refused). Workflow code is what a deploy
 * under a running campaign has to keep replayable; activities change with every role at once.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface DeploySource {
  /** Commit whose workflows/ the first orchestrator build runs (everything else is this checkout's). */
  fromRev: string;
  /** Commit of this checkout (the build the deploy cuts over to); `dirty` when the tree has local edits. */
  toRev: string;
  dirty: boolean;
  /** Files under workflows/ that differ between the two. */
  changedWorkflowFiles: string[];
  /** The exported build: this checkout's HEAD with fromRev's workflows/ (node_modules linked to this one's). */
  root: string;
  remove(): void;
}

const git = (root: string, args: string[]): string =>
  execFileSync('git', args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();

/**
 * `spec`: 'auto' (the parent of the newest commit that changed workflows/), a revision, or 'none'
 * (returns undefined: the deploy runs this checkout's code under a new build id).
 */
export function exportDeploySource(projectRoot: string, spec: string): DeploySource | undefined {
  if (spec === 'none') return undefined;
  try {
    git(projectRoot, ['rev-parse', '--is-inside-work-tree']);
  } catch {
    throw new Error(
      `--deploy-from ${spec}: ${projectRoot} is not a git checkout; pass --deploy-from none to deploy the same code under a new build id`
    );
  }
  const toRev = git(projectRoot, ['rev-parse', 'HEAD']);
  const fromRev =
    spec === 'auto'
      ? git(projectRoot, ['rev-parse', `${git(projectRoot, ['log', '-1', '--format=%H', '--', 'workflows/'])}^`])
      : git(projectRoot, ['rev-parse', '--verify', `${spec}^{commit}`]);
  const changedWorkflowFiles = git(projectRoot, ['diff', '--name-only', fromRev, toRev, '--', 'workflows/'])
    .split('\n')
    .filter(Boolean);
  const dirty = git(projectRoot, ['status', '--porcelain', '--untracked-files=no']).length > 0;
  const root = fs.mkdtempSync(path.join(os.tmpdir(), `dartflow-build-${fromRev.slice(0, 8)}-`));
  // git archive: committed files only, without touching this repository's worktrees or index.
  const extract = (rev: string, ...paths: string[]) =>
    execFileSync('tar', ['-x', '-C', root], {
      input: execFileSync('git', ['archive', '--format=tar', rev, ...paths], { cwd: projectRoot, maxBuffer: 1 << 30 }),
    });
  extract(toRev);
  fs.rmSync(path.join(root, 'workflows'), { recursive: true, force: true }); // files fromRev lacks go too
  extract(fromRev, 'workflows');
  fs.symlinkSync(path.join(projectRoot, 'node_modules'), path.join(root, 'node_modules'), 'dir');
  return {
    fromRev,
    toRev,
    dirty,
    changedWorkflowFiles,
    root,
    remove: () => fs.rmSync(root, { recursive: true, force: true }),
  };
}
