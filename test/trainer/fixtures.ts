/**
 * Synthetic trajectories for trainer tests: real PNG screenshots (a coloured box on white), step records
 * whose actions and behaviour log-probs come from a real ORT session of the given weights.
 */
import { PNG } from 'pngjs';
import { actionMask } from '../../policy/action-space';
import { encodeInstruction, encodeScreenshot } from '../../policy/observation';
import { createInferenceSession } from '../../policy/session';
import { mulberry32, sampleAction } from '../../policy/sampling';
import { numActions, type PolicySpec } from '../../policy/spec';
import type { PolicyWeights } from '../../policy/weights';
import type { TrainGroupRef } from '../../activities/trainer/types';
import {
  StepRecordSchema,
  TrajectoryManifestSchema,
  type StepRecord,
  type TrajectoryManifest,
} from '../../schemas/records';
import { keys } from '../../storage/keys';
import type { ObjectStore } from '../../storage/object-store';

/** 160×160 white PNG with a 40×40 box of `rgb` at (x, y). */
export function boxPng(x: number, y: number, rgb: [number, number, number]): Buffer {
  const png = new PNG({ width: 160, height: 160 });
  for (let j = 0; j < 160; j++)
    for (let i = 0; i < 160; i++) {
      const inBox = i >= x && i < x + 40 && j >= y && j < y + 40;
      const p = (j * 160 + i) * 4;
      png.data[p] = inBox ? rgb[0] : 255;
      png.data[p + 1] = inBox ? rgb[1] : 255;
      png.data[p + 2] = inBox ? rgb[2] : 255;
      png.data[p + 3] = 255;
    }
  return PNG.sync.write(png);
}

/** Is the click cell's centre inside the box? (the synthetic task's reward) */
export function cellHitsBox(spec: PolicySpec, action: number, x: number, y: number): boolean {
  const G = spec.gridSize;
  if (action >= G * G) return false;
  const cx = ((action % G) + 0.5) * (160 / G);
  const cy = (Math.floor(action / G) + 0.5) * (160 / G);
  return cx >= x && cx < x + 40 && cy >= y && cy < y + 40;
}

export interface SyntheticOptions {
  campaignId: string;
  groups: number;
  perGroup: number;
  policyVersion: number;
  seed: number;
}

/** Writes one-step "click the box" episodes sampled from `weights`; returns group refs for trainStep. */
export async function writeSyntheticGroups(
  store: ObjectStore,
  spec: PolicySpec,
  weights: PolicyWeights,
  o: SyntheticOptions
): Promise<{ groups: TrainGroupRef[]; successRate: number }> {
  const session = await createInferenceSession(spec, weights);
  const rng = mulberry32(o.seed);
  const groups: TrainGroupRef[] = [];
  let successes = 0;
  const instruction = 'click the box';
  const text = encodeInstruction(instruction, spec);
  const mask = actionMask(spec, { numFields: 0 });
  for (let g = 0; g < o.groups; g++) {
    const x = Math.floor(rng() * 120);
    const y = Math.floor(rng() * 120);
    const png = boxPng(x, y, [220, 30, 30]);
    const shot = await store.putScreenshot(png);
    const obs = encodeScreenshot(png, spec);
    const out = await session.run({ batch: 1, obs, text, mask });
    const groupId = `${o.campaignId}-g${o.seed}-${g}`;
    const ref: TrainGroupRef = { groupId, taskId: 'synthetic-click', trajectories: [] };
    for (let e = 0; e < o.perGroup; e++) {
      const a = sampleAction(out.logp.subarray(0, numActions(spec)), { seed: Math.floor(rng() * 2 ** 31) });
      const reward = cellHitsBox(spec, a.index, x, y) ? 1 : 0;
      successes += reward;
      const trajectoryId = `${groupId}-e${e}`;
      const step: StepRecord = {
        schemaVersion: 1,
        trajectoryId,
        step: 0,
        observationKey: shot.key,
        observationSize: { width: 160, height: 160 },
        action: { type: 'click', x: 0.5, y: 0.5 },
        actionText: 'click',
        actionIndex: a.index,
        behaviourLogProb: a.logp,
        entropy: out.entropy[0]!,
        policyVersion: o.policyVersion,
        actionOk: true,
        startedAt: 0,
        endedAt: 0,
      };
      const stepsRef = await store.putJsonLines(
        keys.trajectorySteps(o.campaignId, trajectoryId),
        [step],
        StepRecordSchema
      );
      const manifest: TrajectoryManifest = {
        schemaVersion: 1,
        trajectoryId,
        campaignId: o.campaignId,
        taskId: 'synthetic-click',
        groupId,
        seed: g,
        instruction,
        fields: [],
        reward,
        status: 'ok',
        numSteps: 1,
        maxSteps: 1,
        minPolicyVersion: o.policyVersion,
        maxPolicyVersion: o.policyVersion,
        stepsKey: keys.trajectorySteps(o.campaignId, trajectoryId),
        stepsSha256: stepsRef.sha256,
        source: 'rollout',
        envKind: 'synthetic',
        createdAt: Date.now(),
      };
      const manifestKey = keys.trajectoryManifest(o.campaignId, trajectoryId);
      await store.putJson(manifestKey, manifest, TrajectoryManifestSchema);
      ref.trajectories.push({ trajectoryId, manifestKey, reward, injectedFromPool: false });
    }
    groups.push(ref);
  }
  await session.release();
  return { groups, successRate: successes / (o.groups * o.perGroup) };
}
