/**
 * OSWorld task files load unchanged (issue 15): fixtures under fixtures/osworld/ follow the shapes of the
 * current OSWorld release (test_all.json index, examples/<domain>/<id>.json, a repeated id across two
 * domains, string and list `source`, a file without `config`, list `func` with `conj`, `postconfig`,
 * `options` as dict and list, `infeasible`, every setup step type seen in the release).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  DEFAULT_MAX_STEPS,
  SINGLE_SEEDS,
  TaskConfigError,
  loadSuite,
  loadTaskFile,
  parseSuiteLocation,
  parseTaskSpec,
  type TaskSpec,
} from '../../tasks';
import { DEFAULT_SUCCESS_THRESHOLD, isSuccess, successRate } from '../../algorithms/success';
import { parseCampaignConfig } from '../../config/load';

const ROOT = path.join(__dirname, 'fixtures', 'osworld');
const EXAMPLES = path.join(ROOT, 'examples');
const REPEATED = '4c2f9e1a-7b3d-4e8f-9a10-2b5c6d7e8f90';
/** Setup step types of the measured OSWorld release (reference/task-sources.md). */
const STEP_TYPES = [
  'download',
  'launch',
  'execute',
  'open',
  'activate_window',
  'chrome_open_tabs',
  'command',
  'sleep',
  'googledrive',
  'login',
  'chrome_close_tabs',
  'update_browse_history',
];

const fixtureFiles = (): string[] =>
  fs
    .readdirSync(EXAMPLES)
    .flatMap((d) => fs.readdirSync(path.join(EXAMPLES, d)).map((f) => path.join(EXAMPLES, d, f)))
    .sort();
const rawOf = (file: string) => JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;

function expectTaskError(fn: () => unknown, file: string, pattern: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof TaskConfigError, String(err));
    assert.ok(err.message.includes(file), `names ${file}: ${err.message}`);
    assert.match(err.message, pattern);
    return true;
  });
}

test('the fixtures cover every OSWorld shape the loader must accept', () => {
  const raws = fixtureFiles().map(rawOf);
  const steps = new Set(
    raws
      .flatMap((r) => [
        ...((r.config as { type: string }[] | undefined) ?? []),
        ...(((r.evaluator as { postconfig?: { type: string }[] }).postconfig ?? []) as { type: string }[]),
      ])
      .map((s) => s.type)
  );
  assert.deepEqual(
    STEP_TYPES.filter((t) => !steps.has(t)),
    [],
    'every setup step type appears in a fixture'
  );
  assert.ok(
    raws.some((r) => Array.isArray(r.source)),
    'a list source'
  );
  assert.ok(
    raws.some((r) => !('config' in r)),
    'a file without config'
  );
  assert.ok(
    raws.some((r) => (r.evaluator as { func: unknown }).func === 'infeasible'),
    'an infeasible task'
  );
  assert.ok(
    raws.some((r) => Array.isArray((r.evaluator as { func: unknown }).func) && 'conj' in (r.evaluator as object))
  );
  assert.ok(
    raws.some((r) => Array.isArray((r.evaluator as { options?: unknown }).options)),
    'options as a list'
  );
  const dictOptions = raws.some((r) => {
    const o = (r.evaluator as { options?: unknown }).options;
    return typeof o === 'object' && o !== null && !Array.isArray(o);
  });
  assert.ok(dictOptions, 'options as a dict');
  assert.ok(raws.every((r) => !('family' in r) && !('maxSteps' in r) && !('seeds' in r) && !('tier' in r)));
  assert.equal(fixtureFiles().filter((f) => path.basename(f, '.json') === REPEATED).length, 2, 'a repeated id');
});

test('every OSWorld task file loads unchanged, with documented defaults for the dartflow fields', () => {
  for (const file of fixtureFiles()) {
    const raw = rawOf(file);
    const domain = path.basename(path.dirname(file));
    const t = loadTaskFile(file, { domain });
    // every key of the file comes through with its value, unchanged (other releases' keys too)
    for (const [k, v] of Object.entries(raw)) if (k !== 'id') assert.deepEqual(t[k], v, `${file}: ${k}`);
    assert.equal(t.id, `${domain}.${String(raw.id)}`);
    assert.equal(t.originalId, raw.id);
    assert.equal(t.domain, domain);
    assert.equal(t.family, domain, 'family defaults to the domain folder');
    assert.equal(t.maxSteps, DEFAULT_MAX_STEPS);
    assert.equal(DEFAULT_MAX_STEPS, 30, "DART's step budget");
    assert.equal(t.tier, 2);
    assert.deepEqual(t.seeds, SINGLE_SEEDS);
    assert.deepEqual(t.config, raw.config ?? []);
  }
});

test('without a domain folder the family comes from related_apps, and the id is the file’s', () => {
  const single = loadTaskFile(path.join(EXAMPLES, 'libreoffice_calc', '5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c8d.json'));
  assert.equal(single.id, '5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c8d');
  assert.equal(single.family, 'libreoffice_calc');
  assert.equal(single.domain, undefined);
  const multi = loadTaskFile(path.join(EXAMPLES, 'multi_apps', '1f2e3d4c-5b6a-4798-8a9b-0c1d2e3f4a5b.json'));
  assert.equal(multi.family, 'multi_apps', 'several related apps: OSWorld’s cross-app domain name');
  assert.deepEqual(multi.source, ['https://marketplace.example.com/listings/convert-word-to-pdf', 'authors']);
  // dartflow's own fields, when a file sets them, win over the defaults
  const own = parseTaskSpec({
    ...rawOf(path.join(EXAMPLES, 'os', '7b8c9d0e-1f2a-4b3c-9d4e-5f6a7b8c9d0e.json')),
    family: 'refusals',
    maxSteps: 5,
  });
  assert.equal(own.family, 'refusals');
  assert.equal(own.maxSteps, 5);
});

test('a resolved spec parses to itself (it travels inline to env workers and the env server)', () => {
  const suite = loadSuite(ROOT);
  for (const t of suite.taskSpecs)
    assert.deepEqual(parseTaskSpec(JSON.parse(JSON.stringify(t)) as unknown, 'inline'), t);
  for (const t of loadSuite('all').taskSpecs) assert.deepEqual(parseTaskSpec(t, 'inline'), t);
  // the longest file id a domain prefix can be added to still re-parses; one character more is refused
  const raw = rawOf(path.join(EXAMPLES, 'os', '7b8c9d0e-1f2a-4b3c-9d4e-5f6a7b8c9d0e.json'));
  const long = parseTaskSpec({ ...raw, id: 'x'.repeat(120) }, 'long', { domain: 'libreoffice_impress' });
  assert.equal(long.id.length, 140);
  assert.deepEqual(parseTaskSpec(long, 'inline'), long);
  assert.throws(() => parseTaskSpec({ ...raw, id: 'x'.repeat(121) }, 'too long'), /too long: field "id"/);
});

test('an OSWorld folder, its test_all.json and its examples/ folder load as the same suite, ids namespaced', () => {
  const viaFolder = loadSuite(ROOT);
  const viaIndex = loadSuite(path.join(ROOT, 'test_all.json'));
  const viaExamples = loadSuite(EXAMPLES + path.sep);
  const ids = (s: { taskSpecs: TaskSpec[] }) => s.taskSpecs.map((t) => t.id).sort();
  assert.equal(viaFolder.taskSpecs.length, 8);
  assert.deepEqual(ids(viaFolder), ids(viaIndex));
  assert.deepEqual(ids(viaFolder), ids(viaExamples));
  assert.deepEqual(
    viaIndex.tasks,
    viaIndex.taskSpecs.map((t) => t.id)
  );
  assert.equal(viaIndex.id, 'test_all');
  // the id both chrome and thunderbird use is two tasks
  const repeated = viaFolder.taskSpecs.filter((t) => t.originalId === REPEATED);
  assert.deepEqual(repeated.map((t) => t.id).sort(), [`chrome.${REPEATED}`, `thunderbird.${REPEATED}`]);
  assert.notEqual(repeated[0]!.instruction, repeated[1]!.instruction);
  // a relative path works too (resolved against the working directory)
  assert.deepEqual(ids(loadSuite(path.relative(process.cwd(), ROOT) || '.')), ids(viaFolder));
});

test("dartflow's own suites and task files load exactly as before", () => {
  const all = loadSuite('all');
  assert.equal(all.taskSpecs.length, 8);
  for (const t of all.taskSpecs) {
    const raw = rawOf(path.join(__dirname, '../../tasks/defs', `${t.id}.json`));
    assert.equal(t.id, raw.id);
    assert.equal(t.family, raw.family);
    assert.equal(t.tier, raw.tier);
    assert.equal(t.maxSteps, raw.maxSteps);
    assert.deepEqual(t.seeds, raw.seeds);
    assert.equal(t.domain, undefined);
  }
});

test('a dartflow suite file outside the package finds its tasks next to it or in a sibling defs/ folder', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-own-suite-'));
  try {
    fs.mkdirSync(path.join(dir, 'suites'));
    fs.mkdirSync(path.join(dir, 'defs'));
    fs.copyFileSync(
      path.join(__dirname, '../../tasks/defs/click-target.json'),
      path.join(dir, 'defs', 'click-target.json')
    );
    const calc = path.join(EXAMPLES, 'libreoffice_calc', '5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c8d.json');
    fs.copyFileSync(calc, path.join(dir, 'suites', path.basename(calc)));
    const file = path.join(dir, 'suites', 'mine.json');
    fs.writeFileSync(file, JSON.stringify({ id: 'mine', tasks: ['click-target', path.basename(calc, '.json')] }));
    const suite = loadSuite(file);
    assert.deepEqual(suite.tasks, ['click-target', path.basename(calc, '.json')]);
    assert.deepEqual(
      suite.taskSpecs.map((t) => t.family),
      ['click-target', 'libreoffice_calc']
    );
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('suite locations: names, paths and MinIO prefixes', () => {
  assert.deepEqual(parseSuiteLocation('quickstart'), { kind: 'name', name: 'quickstart' });
  assert.deepEqual(parseSuiteLocation('./osworld'), { kind: 'path', path: './osworld' });
  assert.deepEqual(parseSuiteLocation('/data/evaluation_examples'), {
    kind: 'path',
    path: '/data/evaluation_examples',
  });
  assert.deepEqual(parseSuiteLocation('test_all.json'), { kind: 'path', path: 'test_all.json' });
  assert.deepEqual(parseSuiteLocation('s3://dartflow/tasks/osworld/'), {
    kind: 'object-store',
    bucket: 'dartflow',
    prefix: 'tasks/osworld/',
  });
  assert.throws(() => parseSuiteLocation('s3://Bad_Bucket/x'), /not a bucket name/);
  assert.throws(() => parseSuiteLocation('s3://dartflow/../x'), /"\.\." is not allowed/);
  assert.throws(() => loadSuite('s3://dartflow/x'), /read by the campaign/);
});

test('bad task files and suites are TaskConfigErrors naming the file, the field and the fix', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-osworld-'));
  try {
    const write = (rel: string, value: unknown) => {
      const file = path.join(dir, ...rel.split('/'));
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, JSON.stringify(value));
      return file;
    };
    const neither = write('neither/not-a-task.json', { name: 'not-a-task', steps: [] });
    expectTaskError(() => loadTaskFile(neither), neither, /neither a dartflow nor an OSWorld task file/);
    const list = write('list/a-list.json', [1, 2]);
    expectTaskError(() => loadTaskFile(list), list, /must be a JSON object/);
    const index = write('idx/test_all.json', { chrome: ['a'] });
    expectTaskError(() => loadTaskFile(index), index, /an OSWorld index .* not a task file/);

    const base = rawOf(path.join(EXAMPLES, 'multi_apps', '6d5c4b3a-2f1e-40d9-8c7b-6a5f4e3d2c1b.json'));
    const evaluator = base.evaluator as Record<string, unknown>;
    const short = write('bad/short-result.json', {
      ...base,
      id: 'short-result',
      evaluator: { ...evaluator, result: [(evaluator.result as unknown[])[0]] },
    });
    expectTaskError(() => loadTaskFile(short), short, /field "evaluator\.result": with 2 metric functions/);
    const badSource = write('bad/bad-source.json', { ...base, id: 'bad-source', source: 7 });
    expectTaskError(() => loadTaskFile(badSource), badSource, /field "source"/);
    const badConj = write('bad/bad-conj.json', { ...base, id: 'bad-conj', evaluator: { ...evaluator, conj: 'xor' } });
    expectTaskError(() => loadTaskFile(badConj), badConj, /field "evaluator\.conj"/);

    // an index naming a task that is not there: the index, the entry, and where it looked
    const missingIdx = write('missing/test_all.json', { chrome: ['there', 'not-there'] });
    write('missing/examples/chrome/there.json', { ...base, id: 'there' });
    expectTaskError(
      () => loadSuite(path.dirname(missingIdx)),
      missingIdx,
      /field "chrome\.1": no task file for "not-there"/
    );
    const notIndex = write('weird/suite.json', { hello: 'world' });
    expectTaskError(() => loadSuite(notIndex), notIndex, /neither a suite index/);
    const nowhere = path.join(dir, 'no-such-folder');
    expectTaskError(() => loadSuite(nowhere), nowhere, /does not exist .* a folder of task files/);
    fs.mkdirSync(path.join(dir, 'empty'));
    expectTaskError(() => loadSuite(path.join(dir, 'empty')), path.join(dir, 'empty'), /no task files found/);
    assert.throws(() => loadSuite('osworld'), /unknown suite "osworld" .* give a path, e\.g\. \.\/osworld/);
    // a flat file and a domain folder resolving to the same id
    write('clash/chrome.x.json', { ...base, id: 'chrome.x' });
    write('clash/chrome/x.json', { ...base, id: 'x' });
    assert.throws(() => loadSuite(path.join(dir, 'clash')), /task id "chrome\.x" comes from two files/);
    // a dartflow page task must still name a page family
    const page = { ...rawOf(path.join(__dirname, '../../tasks/defs/click-target.json')), family: undefined };
    assert.throws(
      () => parseTaskSpec({ ...page, related_apps: [] }, 'page task'),
      /page task: field "family": .*"dartflow_page" setup step/
    );
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('success is reward ≥ threshold; fractional OSWorld scores are not wins by default', () => {
  assert.equal(DEFAULT_SUCCESS_THRESHOLD, 1);
  assert.equal(parseCampaignConfig({}).campaign.successThreshold, 1);
  assert.equal(isSuccess(0.25), false);
  assert.equal(isSuccess(0.999), false);
  assert.equal(isSuccess(1), true);
  assert.equal(isSuccess(0), false);
  assert.equal(isSuccess(null), false, 'an infrastructure failure is never a success');
  assert.equal(isSuccess(Number.NaN, 0.5), false);
  assert.equal(isSuccess(0.25, 0.25), true);
  assert.equal(isSuccess(0.25, 1e-9), true, "DART's reward > 0 as a tiny threshold");
  assert.equal(successRate([1, 0.25, null, 1]), 0.5);
  assert.equal(successRate([]), 0);
  assert.throws(() => isSuccess(1, 0), /success threshold must be in \(0, 1\]/);
  assert.throws(() => parseCampaignConfig({ campaign: { successThreshold: 0 } }), /successThreshold/);
  assert.equal(parseCampaignConfig({ campaign: { successThreshold: 0.5 } }).campaign.successThreshold, 0.5);
});
