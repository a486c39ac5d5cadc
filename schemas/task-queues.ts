/** Task queue names: stable API shared by workers, workflows and the client (Node-free). */
export const TASK_QUEUES = {
  /** Workflows and data-manager activities. */
  orchestrator: 'orchestrator',
  /** Env workers: runEpisode. */
  env: 'env',
  /** Trainer worker: trainStep. */
  trainer: 'trainer',
  /**
   * The VLM trainer (python/dartflow_vlm/worker.py): trainStep and behaviourClone of `policy.kind: vlm`
   * campaigns, whose trainer is a Python worker; same activity names and contracts as `trainer`.
   */
  trainerVlm: 'trainer-vlm',
} as const;

/** Each policy server polls its own queue so model versions roll out one server at a time. */
export const policyQueue = (serverId: string): string => `policy-${serverId}`;
