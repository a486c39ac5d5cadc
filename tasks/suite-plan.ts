/**
 * Which task files make up a suite stored as a folder (on disk or under a MinIO prefix), given the list
 * of its files: pure, so the disk and object-store loaders share the rules.
 *
 * - With an index (`test_all.json`, `{domain: [id, …]}`): each listed task at `examples/<domain>/<id>.json`
 *   (OSWorld's layout) or `<domain>/<id>.json`, next to the index.
 * - Without: every `<id>.json` directly in the folder, and every `<domain>/<id>.json` one level down.
 * Files found in a domain folder get their id namespaced by the domain (ids repeat across domains).
 * Paths are relative, "/"-separated.
 */
import { TaskConfigError } from './errors';
import type { OsworldIndex } from './schema';

export interface PlannedTask {
  /** File path relative to the suite's root. */
  rel: string;
  domain?: string;
}

/** The index file a folder is read through when it has one (OSWorld's name). */
export const DEFAULT_INDEX_FILE = 'test_all.json';

export function dirOf(rel: string): string {
  const i = rel.lastIndexOf('/');
  return i < 0 ? '' : rel.slice(0, i);
}

const join = (dir: string, rel: string) => (dir ? `${dir}/${rel}` : rel);

/** Tasks listed by an index at `indexRel`; `label(rel)` names a file in errors. */
export function planFromIndex(
  index: OsworldIndex,
  indexRel: string,
  files: ReadonlySet<string>,
  label: (rel: string) => string
): PlannedTask[] {
  const root = dirOf(indexRel);
  const out: PlannedTask[] = [];
  const seen = new Set<string>();
  for (const [domain, ids] of Object.entries(index)) {
    ids.forEach((id, i) => {
      const key = `${domain}/${id}`;
      if (seen.has(key)) return; // listed twice: the same file, load it once
      seen.add(key);
      const candidates = [join(root, `examples/${domain}/${id}.json`), join(root, `${domain}/${id}.json`)];
      const rel = candidates.find((c) => files.has(c));
      if (!rel)
        throw new TaskConfigError(
          `${label(indexRel)}: field "${domain}.${i}": no task file for "${id}" (looked for ${candidates.map(label).join(' and ')})`,
          label(indexRel),
          `${domain}.${i}`
        );
      out.push({ rel, domain });
    });
  }
  return out;
}

/** Tasks of a folder without an index (see the module comment); other files are ignored. */
export function planFromListing(files: readonly string[]): PlannedTask[] {
  const out: PlannedTask[] = [];
  for (const rel of [...files].sort()) {
    if (!rel.endsWith('.json')) continue;
    const parts = rel.split('/');
    if (parts.length === 1) out.push({ rel });
    else if (parts.length === 2) out.push({ rel, domain: parts[0]! });
  }
  return out;
}
