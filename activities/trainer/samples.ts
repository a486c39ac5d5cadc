/**
 * Turns trajectory references into step samples for the trainer: each step's screenshot (downsampled),
 * instruction vector, action mask, previous action (for a spec with previousAction), taken action index,
 * behaviour log-prob, its policy version, and the trajectory's reward and group. Screenshots are content-addressed, so a group's shared first frame is
 * fetched and decoded once.
 */
import { actionMask, indexFromAction } from '../../policy/action-space';
import { encodeInstruction, encodePreviousAction, encodeScreenshot } from '../../policy/observation';
import type { PolicySpec } from '../../policy/spec';
import { StepRecordSchema, TrajectoryManifestSchema } from '../../schemas/records';
import { CorruptObjectError, ObjectNotFoundError } from '../../storage/errors';
import type { ObjectStore } from '../../storage/object-store';
import type { TrainGroupRef } from './types';

export interface StepSample {
  groupId: string;
  trajectoryId: string;
  step: number;
  reward: number;
  obs: Float32Array;
  text: Float32Array;
  mask: Float32Array;
  /** The `prev` input [2A] (spec.previousAction): the step before's action and whether the screen changed. */
  prev?: Float32Array;
  action: number;
  /** null when the behaviour policy recorded none (e.g. demonstrations): IS weight 1. */
  behaviourLogProb: number | null;
  policyVersion: number;
  injectedFromPool: boolean;
}

export interface LoadedBatch {
  samples: StepSample[];
  /** Steps that could not be trained on (unparseable action, action outside the policy's space). */
  skippedSteps: number;
  /** trajectoryId → oldest step version (for the ledger's staleness). */
  minVersions: Record<string, number>;
  /**
   * Groups left out whole because one of their objects (manifest, steps, screenshot) is gone or corrupt in
   * MinIO: a GRPO group is only meaningful complete, and the rest of the batch still trains.
   */
  skippedGroups: SkippedGroup[];
}

export interface SkippedGroup {
  groupId: string;
  trajectoryId: string;
  key: string;
  reason: string;
}

/** Bounded cache of decoded observations by screenshot key (shared first frames, repeated screens). */
class ObservationCache {
  private readonly map = new Map<string, Float32Array>();
  constructor(private readonly capacity = 4096) {}
  async get(key: string, load: () => Promise<Float32Array>): Promise<Float32Array> {
    const hit = this.map.get(key);
    if (hit) return hit;
    const v = await load();
    if (this.map.size >= this.capacity) this.map.delete(this.map.keys().next().value as string);
    this.map.set(key, v);
    return v;
  }
}

/** How far loading got: reported after every trajectory, so a caller can heartbeat through a big batch. */
export interface LoadProgress {
  groupsDone: number;
  groups: number;
  trajectoriesLoaded: number;
}

export async function loadTrainSamples(
  store: ObjectStore,
  spec: PolicySpec,
  groups: readonly TrainGroupRef[],
  opts: { usePolicyIndex?: boolean; onProgress?: (p: LoadProgress) => void } = {}
): Promise<LoadedBatch> {
  let groupsDone = 0;
  let trajectoriesLoaded = 0;
  const progress = () => opts.onProgress?.({ groupsDone, groups: groups.length, trajectoriesLoaded });
  const cache = new ObservationCache();
  const samples: StepSample[] = [];
  const minVersions: Record<string, number> = {};
  let skippedSteps = 0;
  const skippedGroups: SkippedGroup[] = [];
  for (const group of groups) {
    const groupSamples: StepSample[] = [];
    const groupVersions: Record<string, number> = {};
    let groupSkippedSteps = 0;
    let trajectoryId = group.trajectories[0]?.trajectoryId ?? '';
    try {
      for (const ref of group.trajectories) {
        trajectoryId = ref.trajectoryId;
        const manifest = await store.getJson(ref.manifestKey, TrajectoryManifestSchema);
        const steps = await store.getJsonLines(manifest.stepsKey, StepRecordSchema, manifest.stepsSha256);
        const text = encodeInstruction(manifest.instruction, spec);
        const ctx = { fields: manifest.fields };
        const mask = actionMask(spec, { numFields: manifest.fields.length });
        groupVersions[ref.trajectoryId] = manifest.minPolicyVersion;
        // The embedded policy records its own index; other policies' actions are mapped onto the grid.
        const indexOf = (step: (typeof steps)[number]): number | null =>
          opts.usePolicyIndex !== false && step.actionIndex !== undefined
            ? step.actionIndex
            : step.action
              ? indexFromAction(spec, step.action, ctx)
              : null;
        for (const [i, step] of steps.entries()) {
          const action = indexOf(step);
          // What the policy saw at rollout (rollout/engine.ts `previous`): the step before's action, and
          // whether this screenshot differs — content-addressed keys are equal exactly when the PNGs are.
          const before = i > 0 ? steps[i - 1]! : undefined;
          const prevRaw = before ? indexOf(before) : null;
          // An index this action space lacks (another policy's recording) is unknown, like a first step.
          const prevIndex = prevRaw !== null && prevRaw >= 0 && prevRaw < mask.length ? prevRaw : null;
          const prev = spec.previousAction
            ? encodePreviousAction(
                prevIndex === null
                  ? null
                  : { actionIndex: prevIndex, changed: before!.observationKey !== step.observationKey },
                spec
              )
            : undefined;
          if (action === null || mask[action] !== 0) {
            groupSkippedSteps++;
            continue;
          }
          const obs = await cache.get(step.observationKey, async () =>
            encodeScreenshot(await store.getBytes(step.observationKey), spec)
          );
          groupSamples.push({
            groupId: group.groupId,
            trajectoryId: ref.trajectoryId,
            step: step.step,
            reward: ref.reward,
            obs,
            text,
            mask,
            ...(prev ? { prev } : {}),
            action,
            behaviourLogProb: manifest.source === 'demo' ? null : step.behaviourLogProb,
            policyVersion: step.policyVersion,
            injectedFromPool: ref.injectedFromPool,
          });
        }
        trajectoriesLoaded++;
        progress();
      }
    } catch (err) {
      // Deleted or damaged under a running campaign: account for the group and train on the rest.
      // (An unreachable MinIO is not this: StorageUnavailableError propagates and the step is retried.)
      if (err instanceof ObjectNotFoundError || err instanceof CorruptObjectError) {
        skippedGroups.push({ groupId: group.groupId, trajectoryId, key: err.key, reason: err.message.slice(0, 300) });
        groupsDone++;
        progress();
        continue;
      }
      throw err;
    }
    groupsDone++;
    samples.push(...groupSamples);
    Object.assign(minVersions, groupVersions);
    skippedSteps += groupSkippedSteps;
  }
  return { samples, skippedSteps, minVersions, skippedGroups };
}
