/**
 * Policy version lineage: every trained version has one parent (the version its train step started
 * from). Version numbers stay unique (a new version is the next free number), but after a rollback or a
 * pin the next version's parent is not `version − 1`, so staleness is measured along the lineage, not by
 * subtracting numbers: data sampled by a version that is not an ancestor of the version being trained
 * (an abandoned branch, or a newer version that was rolled back) is never trained on.
 *
 * Pure and Node-free (workflows and tests share it). The map is carried across continue-as-new and kept
 * small by `pruneLineage`.
 */

/** version → parent version (the root, v0 or the first version a campaign knows, has parent -1). */
export type Lineage = Record<string, number>;

export const ROOT_PARENT = -1;

export function addVersion(lineage: Lineage, version: number, parent: number): void {
  if (version === parent) throw new Error(`version ${version} cannot be its own parent`);
  lineage[String(version)] = parent;
}

export function parentOf(lineage: Lineage, version: number): number | undefined {
  return lineage[String(version)];
}

/**
 * `head`, its parent, grandparent … at most `depth + 1` versions (head first). A version whose parent is
 * unknown (pruned, or the root) ends the chain.
 */
export function ancestry(lineage: Lineage, head: number, depth: number): number[] {
  const out = [head];
  let v = head;
  for (let i = 0; i < depth; i++) {
    const p = parentOf(lineage, v);
    if (p === undefined || p < 0 || out.includes(p)) break;
    out.push(p);
    v = p;
  }
  return out;
}

/** Steps from `version` up to `head` along the lineage (0 = head itself), or null when not an ancestor within `depth`. */
export function distanceAlong(lineage: Lineage, head: number, version: number, depth: number): number | null {
  const i = ancestry(lineage, head, depth).indexOf(version);
  return i < 0 ? null : i;
}

/**
 * May a sample whose steps were produced by versions in [minVersion, maxVersion] train `head`? Both ends
 * must lie on head's ancestry within `maxStaleness` steps (so no step came from an abandoned branch or
 * from a version newer than head), DART §3.4's staleness bound measured along the lineage.
 */
export function isFreshFor(
  lineage: Lineage,
  head: number,
  sample: { minPolicyVersion: number; maxPolicyVersion: number },
  maxStaleness: number
): boolean {
  const chain = ancestry(lineage, head, maxStaleness);
  return chain.includes(sample.maxPolicyVersion) && chain.includes(sample.minPolicyVersion);
}

/**
 * Drops versions no live version can reach within `depth` steps (keeps the map bounded over thousands of
 * train steps). `live` are the versions that still matter: the head, versions being served or rolled
 * out, the KL reference, a pinned version.
 */
export function pruneLineage(lineage: Lineage, live: readonly number[], depth: number): Lineage {
  const keep = new Set<number>();
  for (const v of live) for (const a of ancestry(lineage, v, depth + 1)) keep.add(a);
  const out: Lineage = {};
  for (const v of keep) {
    const p = parentOf(lineage, v);
    if (p !== undefined) out[String(v)] = p;
  }
  return out;
}

/**
 * Where training goes on after `refused` was abandoned (failed load or canary gate): the nearest
 * ancestor of `refused` that a live server still serves, else its parent.
 */
export function rollbackTarget(lineage: Lineage, refused: number, served: readonly number[]): number {
  const chain = ancestry(lineage, refused, 1_000).slice(1);
  for (const v of chain) if (served.includes(v)) return v;
  return chain[0] ?? refused;
}
