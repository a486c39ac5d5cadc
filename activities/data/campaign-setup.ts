/**
 * prepareCampaign: resolves the task suite into small task refs (train seeds for rollouts, held-out
 * seeds for evaluation), makes sure the initial checkpoint v0 exists (idempotent), and reads pool sizes.
 */
import { ApplicationFailure } from '@temporalio/activity';
import type { CampaignConfig } from '../../schemas/config';
import { keys } from '../../storage/keys';
import type { ObjectStore } from '../../storage/object-store';
import { loadSuite } from '../../tasks/loader';
import type { TaskSpec } from '../../tasks/schema';
import type { TaskRef } from '../../workflows/logic/campaign-state';

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
      let suite;
      try {
        suite = loadSuite(config.campaign.suite);
      } catch (err) {
        throw ApplicationFailure.nonRetryable((err as Error).message, 'TaskConfigError');
      }
      const refs = suite.taskSpecs.map(taskRefOf);
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
