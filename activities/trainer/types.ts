/** trainStep's input and output (Temporal payloads: references and small summaries). Node-free. */
import type { CampaignConfig } from '../../schemas/config';
import type { PolicyArchitecture } from '../../policy/spec';

export interface TrainGroupRef {
  groupId: string;
  taskId: string;
  trajectories: Array<{ trajectoryId: string; manifestKey: string; reward: number; injectedFromPool: boolean }>;
}

export interface TrainStepInput {
  campaignId: string;
  /** Index of this train step (ledger entry key); retries of the same step reuse it. */
  trainStep: number;
  /** Version the step starts from; the result is fromVersion + 1. */
  fromVersion: number;
  groups: TrainGroupRef[];
  trainer: CampaignConfig['trainer'];
  maxStaleness: number;
  /**
   * The versions a step sample may come from: the head (fromVersion) and its ancestors within maxStaleness
   * along the campaign's lineage, head first (workflows/logic/lineage.ts). When given it replaces the
   * numeric bound `fromVersion − maxStaleness`: after a rollback or a pin, data of abandoned versions is
   * never trained and staleness is the distance along the lineage.
   */
  allowedVersions?: number[];
  /** Reference policy of the KL term: the initial model (v0) or the behaviour-cloned warm start. */
  referenceVersion?: number;
  /** The initial weights' seed and the architecture (policy/spec.ts specForPolicy). */
  policy: { seed: number } & PolicyArchitecture;
  /**
   * Benchmarks only: the step is held until it has taken at least this long (a DART-sized trainer on a
   * small policy; trainer.simulatedStepSeconds × env.simulatedTimeScale). The real step still runs.
   */
  minStepMs?: number;
}

export interface TrainStepResult {
  version: number;
  manifestKey: string;
  ledgerKey: string;
  metrics: Record<string, number>;
  /** True when the checkpoint returned was trained by another attempt of the step (earlier or concurrent). */
  reused: boolean;
}
