/**
 * Loads a suite stored in MinIO (`campaign.suite = s3://<bucket>/<prefix>`): the same layouts as a folder
 * on disk (tasks/suite-plan.ts) — task files under the prefix, `<domain>/<id>.json` folders, or an OSWorld
 * tree with its `test_all.json` — so every machine of a cluster reads the same task files.
 */
import { ObjectNotFoundError } from '../storage/errors';
import { TaskConfigError } from './errors';
import { jsonKind } from './format';
import {
  MAX_INDEX_FILE_BYTES,
  MAX_TASK_FILE_BYTES,
  checkIdMatchesFileName,
  checkUniqueIds,
  parseJsonText,
  parseTaskSpec,
  parseWith,
  tooLarge,
  type LoadedSuite,
} from './loader';
import { OsworldIndexSchema } from './schema';
import { OBJECT_STORE_SCHEME } from './suite-location';
import { DEFAULT_INDEX_FILE, dirOf, planFromIndex, planFromListing, type PlannedTask } from './suite-plan';

/** The two calls of the object store this needs (an ObjectStore bound to the suite's bucket). */
export interface TaskObjectReader {
  list(prefix: string): Promise<string[]>;
  getBytes(key: string): Promise<Buffer>;
}

/** Objects read at once: enough to hide round trips, few enough to be gentle on a shared MinIO. */
const READ_CONCURRENCY = 16;

export async function loadSuiteFromStore(
  reader: TaskObjectReader,
  loc: { bucket: string; prefix: string }
): Promise<LoadedSuite> {
  const url = (key: string) => `${OBJECT_STORE_SCHEME}${loc.bucket}/${key}`;
  const prefix = loc.prefix.replace(/\/+$/, '');
  const isIndexKey = prefix.endsWith('.json');
  const root = isIndexKey ? dirOf(prefix) : prefix;
  const keyOf = (rel: string) => (root ? `${root}/${rel}` : rel);

  let keys: string[];
  try {
    keys = await reader.list(root ? `${root}/` : '');
  } catch (err) {
    if (err instanceof ObjectNotFoundError)
      throw new TaskConfigError(
        `campaign.suite ${url(prefix)}: bucket "${loc.bucket}" does not exist`,
        url(prefix),
        'campaign.suite'
      );
    throw err; // storage unavailable: retryable upstream
  }
  const rels = keys.map((k) => (root ? k.slice(root.length + 1) : k)).filter((r) => r.endsWith('.json'));
  if (rels.length === 0)
    throw new TaskConfigError(
      `campaign.suite ${url(prefix)}: no task files under this prefix`,
      url(prefix),
      'campaign.suite'
    );

  const readJson = async (rel: string, limit: number): Promise<unknown> => {
    const where = url(keyOf(rel));
    let buf: Buffer;
    try {
      buf = await reader.getBytes(keyOf(rel));
    } catch (err) {
      if (err instanceof ObjectNotFoundError) throw new TaskConfigError(`${where}: no such object`, where);
      throw err;
    }
    if (buf.length > limit) throw tooLarge(where, buf.length, limit);
    return parseJsonText(buf.toString('utf8'), where);
  };

  const indexRel = isIndexKey
    ? prefix.slice(root ? root.length + 1 : 0)
    : rels.includes(DEFAULT_INDEX_FILE)
      ? DEFAULT_INDEX_FILE
      : undefined;
  let plan: PlannedTask[];
  let description: string;
  if (indexRel !== undefined) {
    const raw = await readJson(indexRel, MAX_INDEX_FILE_BYTES);
    if (jsonKind(raw) !== 'osworld-index')
      throw new TaskConfigError(
        `${url(keyOf(indexRel))}: not a suite index ({domain: [id, …]}, like OSWorld's ${DEFAULT_INDEX_FILE})`,
        url(keyOf(indexRel))
      );
    const index = parseWith(OsworldIndexSchema, raw, url(keyOf(indexRel)));
    plan = planFromIndex(index, indexRel, new Set(rels), (rel) => url(keyOf(rel)));
    description = `OSWorld index ${url(keyOf(indexRel))}`;
  } else {
    plan = planFromListing(rels);
    description = `task files under ${url(prefix)}`;
  }
  if (plan.length === 0)
    throw new TaskConfigError(
      `campaign.suite ${url(prefix)}: no task files found (expected <id>.json, <domain>/<id>.json or a ${DEFAULT_INDEX_FILE} index)`,
      url(prefix),
      'campaign.suite'
    );

  const files = plan.map((p) => url(keyOf(p.rel)));
  const taskSpecs = new Array<LoadedSuite['taskSpecs'][number]>(plan.length);
  for (let i = 0; i < plan.length; i += READ_CONCURRENCY) {
    await Promise.all(
      plan.slice(i, i + READ_CONCURRENCY).map(async (p, j) => {
        const raw = await readJson(p.rel, MAX_TASK_FILE_BYTES);
        const spec = parseTaskSpec(raw, files[i + j]!, p.domain ? { domain: p.domain } : {});
        taskSpecs[i + j] = checkIdMatchesFileName(spec, files[i + j]!);
      })
    );
  }
  checkUniqueIds(taskSpecs, files, url(prefix));
  const name = (indexRel ?? prefix.split('/').at(-1) ?? loc.bucket).replace(/\.json$/, '') || loc.bucket;
  return {
    id: name.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 120),
    description,
    tasks: taskSpecs.map((t) => t.id),
    taskSpecs,
  };
}
