/**
 * The Python trainer's contracts (python/dartflow_vlm/schemas/*.json) are what the zod schemas say now:
 * the committed files equal a fresh generation, train-step.ts's input schemas (which the generator reads)
 * give the same verdicts as the activity's own parsing, and the Python validator gives zod's verdicts on
 * the same inputs (that part skips without the VLM venv).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import {
  BehaviourCloneInputSchema,
  runBehaviourClone,
  runTrainStep,
  TrainStepInputSchema,
  type TrainerDeps,
} from '../../activities/trainer/train-step';
import type { TrainStepInput } from '../../activities/trainer/types';
import { PROJECT_ROOT } from '../../infra/settings';
import { PYTHON_SCHEMA_DIR, renderPythonSchemas } from '../../scripts/gen-python-schemas';
import { PYTHON, SKIP_REASON } from './helpers';

const STALE = 'stale: run `npx tsx scripts/gen-python-schemas.ts`';

type Json = Record<string, unknown>;
const group = (over: Json = {}): Json => ({
  groupId: 'g1',
  taskId: 't1',
  trajectories: [{ trajectoryId: 'a', manifestKey: 'k/a', reward: 1, injectedFromPool: false }],
  ...over,
});
const trainStep = (over: Json = {}): Json => ({
  campaignId: 'c1',
  trainStep: 3,
  fromVersion: 2,
  groups: [group()],
  trainer: { learningRate: 1e-6 },
  maxStaleness: 1,
  policy: { seed: 0, width: 1 },
  ...over,
});
const bc = (over: Json = {}): Json => ({
  campaignId: 'c1',
  trainStep: 1,
  fromVersion: 0,
  demos: [group()],
  epochs: 2,
  learningRate: 1e-5,
  policy: { seed: 0, width: 1 },
  ...over,
});

/** [name, contract, input]: valid inputs and one broken field each. */
const CASES: Array<[string, 'train-step-input' | 'behaviour-clone-input', Json]> = [
  ['minimal trainStep', 'train-step-input', trainStep()],
  ['with lineage and reference', 'train-step-input', trainStep({ allowedVersions: [2, 1], referenceVersion: 1 })],
  ['full trainer config', 'train-step-input', trainStep({ trainer: { clipLow: 0.2, clipHigh: 0.2, useKl: false } })],
  ['missing campaignId', 'train-step-input', (({ campaignId: _, ...rest }) => rest)(trainStep())],
  ['trainStep 0', 'train-step-input', trainStep({ trainStep: 0 })],
  ['fractional fromVersion', 'train-step-input', trainStep({ fromVersion: 1.5 })],
  ['no groups', 'train-step-input', trainStep({ groups: [] })],
  ['empty trajectories', 'train-step-input', trainStep({ groups: [group({ trajectories: [] })] })],
  ['empty taskId', 'train-step-input', trainStep({ groups: [group({ taskId: '' })] })],
  ['unknown trainer field', 'train-step-input', trainStep({ trainer: { bogus: 1 } })],
  ['clipLow above 1', 'train-step-input', trainStep({ trainer: { clipLow: 1.5 } })],
  ['entropyTopFraction 0', 'train-step-input', trainStep({ trainer: { entropyTopFraction: 0 } })],
  ['empty allowedVersions', 'train-step-input', trainStep({ allowedVersions: [] })],
  ['minStepMs above an hour', 'train-step-input', trainStep({ minStepMs: 4_000_000 })],
  ['width is a string', 'train-step-input', trainStep({ policy: { seed: 0, width: '1' } })],
  ['minimal behaviourClone', 'behaviour-clone-input', bc()],
  ['epochs 0', 'behaviour-clone-input', bc({ epochs: 0 })],
  ['epochs above 1000', 'behaviour-clone-input', bc({ epochs: 1001 })],
  ['negative learning rate', 'behaviour-clone-input', bc({ learningRate: -1 })],
  ['no demos', 'behaviour-clone-input', bc({ demos: [] })],
];

const zodAccepts = (contract: string, input: Json): boolean =>
  (contract === 'train-step-input' ? TrainStepInputSchema : BehaviourCloneInputSchema).safeParse(input).success;

/**
 * train-step.ts's own verdict: its parser runs before any storage access, so a store that throws a
 * sentinel on first use tells "accepted" (the sentinel) from "refused" (InvalidTrainInput).
 */
async function trainStepAccepts(contract: string, input: Json): Promise<boolean> {
  const sentinel = new Error('reached storage');
  const store = new Proxy(
    {},
    {
      get() {
        throw sentinel;
      },
    }
  );
  const deps = { store } as unknown as TrainerDeps;
  try {
    if (contract === 'train-step-input') await runTrainStep(deps, input as unknown as TrainStepInput);
    else await runBehaviourClone(deps, input as unknown as Parameters<typeof runBehaviourClone>[1]);
  } catch (err) {
    if (err === sentinel) return true;
    if ((err as { type?: string }).type === 'InvalidTrainInput') return false;
    throw err;
  }
  throw new Error('neither refused nor reached storage');
}

describe('Python trainer contracts (python/dartflow_vlm/schemas)', () => {
  it('the committed JSON Schemas are a fresh generation from the zod schemas', async () => {
    const fresh = await renderPythonSchemas();
    const committed = fs.readdirSync(PYTHON_SCHEMA_DIR).filter((f) => f.endsWith('.json'));
    assert.deepEqual(committed.sort(), Object.keys(fresh).sort(), STALE);
    for (const [name, text] of Object.entries(fresh)) {
      // Parsed, so a formatter's whitespace does not matter; any content change does.
      const onDisk: unknown = JSON.parse(fs.readFileSync(path.join(PYTHON_SCHEMA_DIR, name), 'utf8'));
      assert.deepEqual(onDisk, JSON.parse(text), `${name} ${STALE}`);
    }
  });

  it("train-step.ts's input schemas give the activity's own verdicts", async () => {
    let refused = 0;
    for (const [name, contract, input] of CASES) {
      const own = await trainStepAccepts(contract, input);
      assert.equal(zodAccepts(contract, input), own, name);
      if (!own) refused++;
    }
    assert.ok(refused >= 10 && refused < CASES.length, 'the cases exercise both verdicts');
  });

  it('the Python validator gives the same verdicts', { skip: SKIP_REASON }, () => {
    const script = [
      'import json, sys',
      'from dartflow_vlm.validate import problems',
      'cases = json.load(sys.stdin)',
      'print(json.dumps([not problems(c["contract"], c["input"]) for c in cases]))',
    ].join('\n');
    const payload = CASES.map(([, contract, input]) => ({ contract, input }));
    const r = spawnSync(PYTHON ?? 'python3', ['-c', script], {
      cwd: PROJECT_ROOT,
      input: JSON.stringify(payload),
      encoding: 'utf8',
      timeout: 120_000,
    });
    assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
    const verdicts = JSON.parse(r.stdout) as boolean[];
    CASES.forEach(([name, contract, input], i) => assert.equal(verdicts[i], zodAccepts(contract, input), name));
  });
});
