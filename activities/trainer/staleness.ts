/**
 * Which step samples a train step may use, and how stale they are. With the campaign's lineage
 * (`allowedVersions`: the head and its ancestors within maxStaleness, head first) a sample is allowed
 * only if its version is on that chain, and its staleness is its distance along it; without it (a
 * stand-alone step) the numeric bound `fromVersion − maxStaleness` applies. Pure.
 */
export interface StalenessRule {
  fromVersion: number;
  maxStaleness: number;
  allowedVersions?: readonly number[];
}

export function isAllowedVersion(rule: StalenessRule, version: number): boolean {
  if (rule.allowedVersions) return rule.allowedVersions.includes(version);
  return version >= rule.fromVersion - rule.maxStaleness && version <= rule.fromVersion;
}

/** Versions between a sample and the step's head (0 = sampled by the head itself). */
export function stalenessOf(rule: StalenessRule, version: number): number {
  if (rule.allowedVersions) {
    const i = rule.allowedVersions.indexOf(version);
    if (i >= 0) return i;
  }
  return Math.max(0, rule.fromVersion - version);
}
