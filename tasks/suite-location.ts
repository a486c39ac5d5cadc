/**
 * What `campaign.suite` names: one of dartflow's suites (tasks/suites/<name>.json), a path (a folder of
 * task files, an OSWorld folder with its `test_all.json`, or an index file), or a MinIO prefix
 * (`s3://<bucket>/<prefix>`, read by the campaign's orchestrator). Pure and Node-free.
 */
import { TaskConfigError } from './errors';

export type SuiteLocation =
  | { kind: 'name'; name: string }
  | { kind: 'path'; path: string }
  | { kind: 'object-store'; bucket: string; prefix: string };

const NAME = /^[A-Za-z0-9_-][A-Za-z0-9._-]*$/;
const BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
export const OBJECT_STORE_SCHEME = 's3://';

export function parseSuiteLocation(spec: string): SuiteLocation {
  const s = spec.trim();
  if (s.length === 0)
    throw new TaskConfigError(
      'campaign.suite is empty: give a suite name, a path or s3://<bucket>/<prefix>',
      undefined,
      'campaign.suite'
    );
  if (s.startsWith(OBJECT_STORE_SCHEME)) {
    const rest = s.slice(OBJECT_STORE_SCHEME.length);
    const slash = rest.indexOf('/');
    const bucket = slash < 0 ? rest : rest.slice(0, slash);
    const prefix = slash < 0 ? '' : rest.slice(slash + 1);
    if (!BUCKET.test(bucket))
      throw new TaskConfigError(
        `campaign.suite "${spec}": "${bucket}" is not a bucket name (3–63 lower-case letters, digits, "." or "-"); ` +
          'write s3://<bucket>/<prefix>',
        undefined,
        'campaign.suite'
      );
    if (prefix.split('/').some((seg) => seg === '..'))
      throw new TaskConfigError(
        `campaign.suite "${spec}": ".." is not allowed in a prefix`,
        undefined,
        'campaign.suite'
      );
    return { kind: 'object-store', bucket, prefix };
  }
  // A bare word is a suite name; anything path-like (a separator, a ".json" file, ".", "~") is a path.
  if (NAME.test(s) && !s.endsWith('.json')) return { kind: 'name', name: s };
  return { kind: 'path', path: s };
}
