/**
 * prepareCampaign: resolves the task suite into small task refs (train seeds for rollouts, held-out
 * seeds for evaluation), makes sure the initial checkpoint v0 exists (idempotent), and reads pool sizes.
 * The suite is a name, a path on the orchestrator's machine, or a MinIO prefix (`s3://<bucket>/<prefix>`,
 * read through the campaign's store so every machine of a cluster sees the same task files).
 */
import { ApplicationFailure } from '@temporalio/activity';
import type { CampaignConfig } from '../../schemas/config';
import { keys } from '../../storage/keys';
import type { ObjectStore } from '../../storage/object-store';
import { TaskConfigError } from '../../tasks/errors';
import { loadSuite, type LoadedSuite } from '../../tasks/loader';
import type { TaskSpec } from '../../tasks/schema';
import { parseSuiteLocation } from '../../tasks/suite-location';
import { loadSuiteFromStore } from '../../tasks/store-suite';
import type { TaskRef } from '../../workflows/logic/campaign-state';
import { unknownWeightedTasks } from '../../workflows/logic/demo-schedule';

export interface CampaignSetupDeps {
  store: ObjectStore;
  /** Writes checkpoint v0 (initial weights from the policy seed) when it does not exist yet. */
  ensureInitialCheckpoint: (campaignId: string, config: CampaignConfig) => Promise<number>;
}

export function createCampaignSetupActivities(deps: CampaignSetupDeps) {
  return {
    async prepareCampaign(input: { config: CampaignConfig }): Promise<{
      tasks: TaskRef[];
      heldOut: TaskRef[];
      initialVersion: number;
      poolSizes: Record<string, number>;
    }> {
      const { config } = input;
      let suite: LoadedSuite;
      try {
        suite = await loadCampaignSuite(deps.store, config.campaign.suite);
      } catch (err) {
        // A bad suite is permanent; an unreachable MinIO is not (the activity retries).
        if (err instanceof TaskConfigError) throw ApplicationFailure.nonRetryable(err.message, 'TaskConfigError');
        throw err;
      }
      const refs = suite.taskSpecs.map(taskRefOf);
      const unknown = unknownWeightedTasks(
        refs.map((r) => r.id),
        config.policy.bcTaskWeights
      );
      if (unknown.length > 0)
        throw ApplicationFailure.nonRetryable(
          `policy.bcTaskWeights names ${unknown.map((id) => JSON.stringify(id)).join(', ')}, not a task of suite ` +
            `${JSON.stringify(config.campaign.suite)} (its tasks: ${refs.map((r) => r.id).join(', ')}): fix or remove the key`,
          'ConfigError'
        );
      await deps.store.ensureBucket();
      const initialVersion = await deps.ensureInitialCheckpoint(config.campaign.id, config);
      const poolSizes: Record<string, number> = {};
      for (const key of await deps.store.list(keys.poolPrefix(config.campaign.id))) {
        const taskId = key.split('/').at(-2);
        if (taskId) poolSizes[taskId] = (poolSizes[taskId] ?? 0) + 1;
      }
      return { tasks: refs, heldOut: refs, initialVersion, poolSizes };
    },
  };
}

/** Loads `campaign.suite`: from MinIO for an `s3://` prefix (same server as the store), else from disk. */
export async function loadCampaignSuite(store: ObjectStore, spec: string): Promise<LoadedSuite> {
  const loc = parseSuiteLocation(spec);
  if (loc.kind === 'object-store') return loadSuiteFromStore(store.withBucket(loc.bucket), loc);
  return loadSuite(spec);
}

/** A task as the campaign state refers to it (the spec travels inline: it is small). */
export function taskRefOf(spec: TaskSpec): TaskRef {
  return {
    id: spec.id,
    family: spec.family,
    spec: spec as unknown as TaskRef['spec'],
    trainSeeds: spec.seeds.train,
    maxSteps: spec.maxSteps,
  };
}
