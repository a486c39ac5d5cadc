/**
 * Where benchmark results go. A run writes to <dataDir>/bench (.data/bench: git-ignored) so trying a
 * benchmark never rewrites the numbers the docs quote; `--publish` writes docs/bench/, the tracked copy
 * docs/benchmarks.md shows. Pure: the caller supplies the directories.
 */
import path from 'node:path';

export const PUBLISH_FLAG = '--publish';

/** Takes `--publish` out of a suite's arguments (suites parse the rest strictly). */
export function splitPublishFlag(args: readonly string[]): { publish: boolean; args: string[] } {
  return { publish: args.includes(PUBLISH_FLAG), args: args.filter((a) => a !== PUBLISH_FLAG) };
}

export function benchOutputDir(opts: { publish: boolean; projectRoot: string; dataDir: string }): string {
  return opts.publish ? path.join(opts.projectRoot, 'docs', 'bench') : path.join(opts.dataDir, 'bench');
}
