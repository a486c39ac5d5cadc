/**
 * CampaignConfig: the one config object of a dartflow campaign, CleanRL-style — every field is described
 * and has a default. Defaults are DART's (docs/reference/dart-spec.md, section in brackets) unless a field says
 * why the embedded default differs. Node-free: workflows validate their input with it too.
 */
import { ARCHITECTURE_OPTIONS } from '../policy/architecture-options';
import { z } from 'zod';
import { UiTarsOptionsSchema } from './uitars-options';

const prob = z.number().min(0).max(1);
/** A timeout in whole seconds, a minute by default (the value before it was configurable). */
const timeoutSeconds = (min: number) => z.number().int().min(min).max(3600).default(60);
const posInt = z.number().int().positive();

export const CampaignSectionSchema = z
  .strictObject({
    id: z
      .string()
      .regex(
        /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/,
        'letters, digits, ".", "_" or "-", at most 100 chars, starting with a letter or digit'
      )
      .default('quickstart')
      .describe('Campaign id: workflow id prefix and MinIO prefix (campaigns/<id>/).'),
    mode: z
      .enum(['async', 'sync'])
      .default('async')
      .describe(
        'async = DART decoupled (rollout-wise, overlapping training); sync = coupled baseline with batch barrier.'
      ),
    suite: z
      .string()
      .min(1)
      .default('quickstart')
      .describe(
        'Tasks to train on: a suite name (tasks/suites/<suite>.json); a path on the orchestrator machine to a folder of task files (<id>.json, <domain>/<id>.json) or to an OSWorld index such as test_all.json ({domain: [id, …]}, tasks at [examples/]<domain>/<id>.json); or a MinIO prefix s3://<bucket>/<prefix> laid out the same way. Tasks found in a domain folder get the id <domain>.<id>.'
      ),
    successThreshold: z
      .number()
      .gt(0)
      .max(1)
      .default(1.0)
      .describe(
        "A trajectory counts as a success when its reward ≥ this (the manifest keeps the raw reward). 1.0 = OSWorld's published success rate (a task is solved when its score is 1; partial scores such as 0.25 are failures); dartflow's own tasks reward 0 or 1, so any value in (0, 1] gives the same result. DART's reward > 0: a tiny value such as 1e-9."
      ),
    maxTrainSteps: posInt.default(200).describe('Stop after this many train steps [§4.9: 200].'),
    maxEpisodes: posInt.default(1_000_000).describe('Stop after this many rollout episodes.'),
    maxMinutes: z
      .number()
      .positive()
      .optional()
      .describe(
        'Stop (drain, final evaluation, complete) once the campaign has run this many minutes since it started, across continue-as-new. Unset: no time limit.'
      ),
    targetSuccess: prob
      .optional()
      .describe('Stop early when held-out greedy success reaches this on every task family.'),
    targetConsecutiveEvals: posInt
      .default(1)
      .describe(
        'targetSuccess must hold in this many consecutive evaluations (each of a newer version) to stop. After one that meets it, the next evaluation runs on the next served version, not eval.everyVersions later.'
      ),
    targetMinEpisodesPerFamily: z
      .number()
      .int()
      .nonnegative()
      .default(0)
      .describe(
        'An evaluation counts towards targetSuccess only with at least this many held-out greedy episodes per family (set eval.episodesPerTask at least as high).'
      ),
  })
  .describe('What to train and when to stop.');

export const RolloutSchema = z
  .strictObject({
    nMax: posInt.default(8).describe('Rollouts per task group when the task is hard: N_max [§4.6: rollout_n 8].'),
    nMin: posInt.default(1).describe('Fewest rollouts for an easy task [§4.6: min_rollout_n 1].'),
    dynamicRollout: z.boolean().default(true).describe('Adapt rollouts per task from its success rate [§4.6].'),
    successRateThreshold: prob
      .default(0.6)
      .describe('θ: below it a task gets nMax; above, n = ⌊9/sr − 7⌋ [§4.6: 0.6].'),
    maxSteps: posInt.default(30).describe('Global step budget per episode [§2.5: 30].'),
    dynamicMaxSteps: z.boolean().default(true).describe('Per-task step budget from the longest success so far [§4.7].'),
    maxStepsMargin: z
      .number()
      .int()
      .nonnegative()
      .default(0)
      .describe('Steps added to the longest success [§4.7: unknown, 0].'),
    solvedTaskEvery: posInt
      .default(1)
      .describe(
        "A solved task (its last solvedTaskWindow training rewards all successes) takes one round-robin turn in this many; its other turns go to the next task. 1 = DART (every task every turn; a solved task still gets n = 2 rollouts whose equal rewards teach nothing). dartflow's extension, not in DART."
      ),
    solvedTaskWindow: posInt
      .max(16)
      .default(16)
      .describe(
        'Training rewards, newest first, that must all be successes for solvedTaskEvery to count a task as solved (at most the 16 the campaign keeps per task).'
      ),
    taskTurns: z
      .enum(['round-robin', 'signal'])
      .default('round-robin')
      .describe(
        "How the next task group's task is chosen. 'round-robin' = DART (every task in turn; solvedTaskEvery can make solved tasks skip turns). 'signal': each task's share of groups follows how many of its last 16 groups taught GRPO something (passed curation: rewards that differ, or an all-failed group rescued by a pooled success), Jeffreys estimate (taught + ½) / (groups + 1), picked by smooth weighted round robin; a task none of whose last 16 groups taught weighs 0.5/17 (6 % of an untried task's weight, 3 % of one whose groups all teach; a task that never succeeds and has no pooled success drops the same way) and climbs back when its groups teach again. Episodes then go where a group is least likely to be skipped for equal rewards. Replaces solvedTaskEvery (keep it at 1). dartflow's extension, not in DART."
      ),
    temperature: z.number().positive().max(10).default(1.0).describe('Sampling temperature [§4.4: 1.0].'),
    envConcurrency: posInt
      .default(4)
      .describe(
        "Episodes in flight at once, running or queued in the env workers' slot pools. A task group holds its n episodes until its slowest one ends, so 3–4× the total env slots keeps every slot busy (docs/benchmarks.md, efficiency)."
      ),
    schedulerShards: posInt
      .max(64)
      .default(1)
      .describe(
        'Scheduler workflows that run task groups and report them back in batches (1 = the campaign starts every group as its own workflow). Use 4 or more from ≈ 500 envs on: one campaign workflow then spends its server-side lock on starting and hearing from every group, group starts wait tens of seconds, and each continue-as-new leaves envs idle (512 envs: 64 % / 49 % env utilization with 1, 72 % with 4; docs/benchmarks.md, scale). With shards the campaign pays history per batch, not per group, and the shards run groups in rollout lanes (many groups per workflow, so episode completions share workflow tasks; docs/architecture.md, scheduler shards and rollout lanes).'
      ),
  })
  .describe('Rollout scheduling and DART dynamic rollout number / trajectory length.');

export const CurationSchema = z
  .strictObject({
    maxStaleness: z
      .number()
      .int()
      .nonnegative()
      .default(1)
      .describe('A step may train version v only if sampled by v − maxStaleness or newer [§3.4: top-2 versions → 1].'),
    experiencePool: z.boolean().default(true).describe('Inject a pooled success into all-failed groups [§4.8].'),
    poolKey: z
      .enum(['task', 'instruction'])
      .default('task')
      .describe(
        "What the experience pool is keyed by. 'task' [§4.8]: the newest precollectSuccessesPerTask successes of a task, and an all-failed group gets the task's newest. 'instruction': the newest k per (task, instruction), and an all-failed group gets the newest success of its own instruction, else the task's newest; for tasks whose seeds ask different things (click-colour: eight colours), where a task-level success is usually another instruction's (docs/bench/quickstart-colours.md)."
      ),
    poolMaxPerTask: posInt
      .default(64)
      .describe("With poolKey 'instruction': a task's pool holds at most this many successes (the oldest go first)."),
    stepDiscount: z
      .number()
      .gt(0)
      .max(1)
      .default(1)
      .describe(
        "γ: GRPO sees a trajectory's reward × γ^(steps − 1), so of two successes the shorter scores higher, and a group of successes of different lengths is trained on (a group of equal rewards is still skipped). Only positive rewards shrink: a failure (0, MiniWoB's −1) is not made milder by stalling first. The train step, its ledger (consumed[].reward) and train/batch_success see the discounted rewards. 1 = DART (length does not count). Below 1 the policy unlearns free first actions (a key that changes nothing, then the click) that keep sampled rollouts at ≈ 100 % while the greedy policy repeats the no-op until its budget ends. dartflow's extension, not in DART."
      ),
    precollect: z.boolean().default(false).describe('Pre-collect successes for hard tasks before training [§4.8].'),
    precollectSuccessesPerTask: posInt.default(2).describe('k successes per hard task to pre-collect.'),
    precollectMaxAttempts: posInt.default(64).describe('Give up pre-collecting a task after this many attempts.'),
    accMax: prob
      .default(1.0)
      .describe('Groups with mean reward ≥ accMax are not trained on (zero advantage) [§3.4: 1.0].'),
    groupSize: posInt.default(8).describe('Trajectories per trained group (down-/up-sampled) [§3.4: 8].'),
  })
  .describe('Data manager: staleness bound, experience pool and pre-collection.');

export const TrainerSchema = z
  .strictObject({
    learningRate: z
      .number()
      .positive()
      .default(3e-3)
      .describe(
        'Adam learning rate of the behaviour-cloning warm start, and of the RL steps unless rlLearningRate is set. DART used 1e-6 for a 7B VLM [§6.2]; 3e-3 suits the 26k-param embedded CNN.'
      ),
    rlLearningRate: z
      .number()
      .positive()
      .nullable()
      .default(null)
      .describe(
        'Adam learning rate of the RL train steps when it differs from the behaviour-cloning warm start (null = learningRate for both); both trainers, embedded and VLM, honour it.'
      ),
    adamBeta1: prob.default(0.9).describe('Adam β1 (verl default 0.9).'),
    adamBeta2: prob.default(0.999).describe('Adam β2 (verl default 0.999).'),
    weightDecay: z.number().nonnegative().default(0).describe('AdamW decay [§6.2: 0.1 for the VLM].'),
    gradClip: z.number().positive().default(2.0).describe('Global gradient-norm clip [§6.2: 2.0].'),
    clipLow: z.number().min(0).max(1).default(0.1).describe('PPO ε_low [§4.3: 0.1].'),
    clipHigh: z.number().min(0).max(10).default(0.28).describe('PPO ε_high [§4.3: 0.28].'),
    dualClip: z.number().min(1).default(10).describe('Dual-clip constant c for negative advantages [§4.3: 10].'),
    tisCap: z
      .number()
      .positive()
      .default(1.0)
      .describe('Truncated-IS cap C in w = min(π_old/π_behaviour, C) [§4.4: 1.0].'),
    klBeta: z.number().nonnegative().default(0.1).describe('β of the k3 KL to the initial policy [§4.3: 0.1].'),
    entropyTopFraction: z
      .number()
      .gt(0)
      .max(1)
      .default(0.8)
      .describe('Train on this top fraction of step entropies [§4.5: 0.8].'),
    entropyCoef: z.number().nonnegative().default(0).describe('Entropy bonus coefficient [§4.3: 0].'),
    targetKl: z
      .number()
      .positive()
      .nullable()
      .default(null)
      .describe(
        "Early stop of a train step's minibatch updates once the k3 estimate of KL(π_old ‖ π_θ) on the next minibatch exceeds it (PPO's target_kl; null = off). Embedded trainer only: the VLM trainer makes one update per step and refuses it."
      ),
    useEntropySelection: z.boolean().default(true).describe('Ablation switch: high-entropy step selection.'),
    useTis: z.boolean().default(true).describe('Ablation switch: truncated importance sampling.'),
    useKl: z.boolean().default(true).describe('Ablation switch: KL to the reference policy.'),
    useClip: z.boolean().default(true).describe('Ablation switch: PPO clipping.'),
    minGroups: posInt
      .default(6)
      .describe('Fewest eligible groups to start a train step [§3.4: train_batch_size_min 6].'),
    maxGroups: posInt.default(8).describe('Most groups per train step [§3.4: train_batch_size_max 8].'),
    minibatchSize: posInt.default(64).describe('Step samples per gradient computation (heartbeat per minibatch).'),
    heartbeatTimeoutSeconds: timeoutSeconds(10).describe(
      "Heartbeat timeout of the trainStep and behaviourClone activities: a step whose trainer died is retried on another trainer after this long. The VLM trainer (Python) keeps a live step alive through phases that send nothing themselves (a checkpoint load or upload of a large model: it re-sends its latest heartbeat after a third of this timeout of silence); the embedded CNN's trainer heartbeats per minibatch and while samples load, but not while its checkpoint loads or uploads (seconds), so keep it well above that. Temporal caps it at the activity's 30-minute start-to-close timeout."
    ),
    epochs: posInt.default(1).describe('Passes over a batch per train step [§4.1: ppo_epochs 1].'),
    advantageStatistics: z
      .enum(['steps', 'trajectories'])
      .default('steps')
      .describe(
        "Population of a group's advantage mean/std: every step sample (DART's code [§4.2]) or each trajectory once."
      ),
    optimizerReset: z
      .enum(['none', 'rl-start', 'every-step'])
      .default('none')
      .describe(
        'Adam moments: carried from the parent checkpoint (none), fresh at the first RL step from the reference (rl-start: not carried over from behaviour cloning), or fresh every step.'
      ),
    demoAnchorCoef: z
      .number()
      .nonnegative()
      .default(0)
      .describe(
        "Weight of a behaviour-cloning term in every RL minibatch: coef × mean −log π(a_demo|s) over demoAnchorSamples steps of the demonstrations the KL reference was cloned from (PPO-ptx; not in DART's loss: 0). Holds families whose groups all succeed, which otherwise get no gradient and drift with the shared weights. Needs a behaviour-cloning start (policy.bcWarmStartEpisodes > 0); embedded trainer only."
      ),
    demoAnchorSamples: posInt
      .default(32)
      .describe('Demonstration steps drawn for the anchor term of each minibatch (trainer.demoAnchorCoef > 0).'),
    simulatedStepSeconds: z
      .number()
      .nonnegative()
      .default(0)
      .describe(
        'Benchmarks only: after the real train step ran, the trainer waits until the step took this long × env.simulatedTimeScale (a DART-sized trainer: ≥ 300 s between checkpoints [§4.9]); 0 = off.'
      ),
  })
  .describe('Step-wise GRPO trainer.');

export const PolicySchema = z
  .strictObject({
    kind: z.enum(['embedded', 'vlm']).default('embedded').describe('embedded ONNX CNN, or an OpenAI-compatible VLM.'),
    seed: z.number().int().default(0).describe('Seed of the initial weights.'),
    width: posInt.default(1).describe('Channel multiplier of the embedded CNN (1 ≈ 26k parameters).'),
    clickMaxContext: z
      .boolean()
      .default(false)
      .describe(
        "Embedded CNN: also adds the feature map's global max to every click logit's context (+1,024 weights at width 1, zero at init), so a small thing anywhere on the page — one named checkbox still unticked — reaches the Submit click at full strength instead of diluted by the mean (policy/spec.ts). Policy servers serve it without being told (each checkpoint names its network), as for width ≠ 1, unless pinned to another by --spec-file. Measured: no gain, in cloning alone or in the suite bench’s RL (docs/benchmarks.md, section The whole suite from 4,096 demos)."
      ),
    clickWordQuery: z
      .boolean()
      .default(false)
      .describe(
        'Embedded CNN: per-word click queries (+V×C = 4,096 weights at width 1, zero at init): every click logit also adds the best match over the instruction words of one query per word, max(0, max_w W_w·h(cell)), so an instruction naming several colours (tick-checkboxes) scores a cell by the one word it matches best instead of by the sum of all colour queries (policy/spec.ts). Policy servers take its network from the checkpoints, as for clickMaxContext. Measured: no gain in cloning (tick-checkboxes 61 % against 55-61 % without; docs/benchmarks.md, section Per-word click queries).'
      ),
    hueInput: z
      .boolean()
      .default(false)
      .describe(
        "Embedded CNN: four more input channels computed in the graph from the RGB screenshot, each pixel's hue angle θ as (cos θ, sin θ, cos 2θ, sin 2θ), scaled down for unsaturated pixels (opponent-colour axes divided by their length + 0.1; +1,024 weights at width 1, and another initial network: conv0 has 7 input channels). Orange (#f58231) is almost exactly the midpoint of red and yellow in RGB, so no linear function of RGB scores it above both; on the hue circle every saturated colour is separable by one linear unit, and the second harmonic doubles the angle between neighbours (policy/spec.ts hueChannels). Policy servers take its network from the checkpoints."
      ),
    servers: posInt
      .default(1)
      .describe(
        'Embedded policy servers `npm start` runs beside the campaign (workers started on their own: `dartflow workers --policy-servers M`). Rollouts use every server that has registered, however started.'
      ),
    reloadPickupTimeoutSeconds: timeoutSeconds(5).describe(
      "A model rollout drops a policy server whose worker has not picked its reload up after this long (a dead server: a live one polls its queue all the time) and goes on with the others; the new version reaches the live servers only after it (and in campaign.mode sync, training waits too). Raise it only if servers' workers can be busy for longer (they run one reload at a time)."
    ),
    maxBatch: posInt
      .default(32)
      .describe(
        'Dynamic batching: largest batch per inference call of the policy servers `npm start` runs (servers started on their own: --max-batch or DARTFLOW_POLICY_MAX_BATCH).'
      ),
    maxWaitMs: z
      .number()
      .nonnegative()
      .default(2)
      .describe(
        'Dynamic batching: longest wait to fill a batch, in the policy servers `npm start` runs (servers started on their own: --max-wait-ms or DARTFLOW_POLICY_MAX_WAIT_MS).'
      ),
    vlmEndpoint: z
      .url()
      .optional()
      .describe(
        'Deprecated, not read (no longer required for kind = vlm): a VLM campaign samples from and rolls out to the vLLM servers that register themselves (workers/vllm-policy-server.ts); to use your own vLLM, attach it to a vLLM role with --vllm-url <its URL> and drop this field.'
      ),
    vlmModel: z
      .string()
      .optional()
      .describe('kind = vlm: the model name sent to the vLLM servers (their --served-model-name; default "dartflow").'),
    options: UiTarsOptionsSchema.omit({ model: true })
      .strict()
      .refine((o) => o.minPixels === undefined || o.maxPixels === undefined || o.minPixels <= o.maxPixels, {
        path: ['minPixels'],
        message: 'must be ≤ maxPixels',
      })
      .optional()
      .describe(
        'kind = vlm: UI-TARS episode options the campaign sends with every episode (rollouts, demonstrations, pre-collection, evaluations, rollout gates) to the env workers, over their defaults (vlm/policy-options.ts): maxTokens, topLogprobs, logitBias (token id → bias), coordModel ("ui-tars-1.5" pixels | "ui-tars" 0–1000), minPixels, maxPixels, resizeScreenshots, maxImages, maxTexts, language, callUser, password, timeoutMs, maxRetries (docs/vlm.md).'
      ),
    bcWarmStartEpisodes: z
      .number()
      .int()
      .nonnegative()
      .default(0)
      .describe(
        'Oracle demonstrations for a behaviour-cloning warm start before RL (0 = off); DART starts RL from an SFT model.'
      ),
    bcEpochs: posInt.default(20).describe('Passes over the demonstrations in the behaviour-cloning warm start.'),
    bcTaskWeights: z
      .record(z.string().min(1), z.number().positive().max(1000))
      .default({})
      .describe(
        'Relative share of the warm start demonstrations per task id of the suite (tasks not named weigh 1; {} = round robin, the same number for every task). Cloning needs far more demonstrations on some tasks: tick-checkboxes cloned to 55-61 % greedy from 512 demos in the suite mix and to 92 % from 2,048 on its own (docs/benchmarks.md, section Demonstrations where cloning needs them). A name that is no task of the suite stops the campaign at its start.'
      ),
  })
  .describe('The policy and the rollout service.');

export const EnvSchema = z
  .strictObject({
    kind: z
      .enum(['browser', 'remote', 'simulated', 'osworld'])
      .default('browser')
      .describe(
        'Env implementation of the env workers `npm start` runs (workers started on their own: --env-kind or DARTFLOW_ENV_KIND). osworld = OSWorld VMs leased from a GUI-Docker-Env cluster (env workers read DARTFLOW_OSWORLD_*; docs/osworld.md).'
      ),
    workers: posInt
      .default(1)
      .describe(
        'Env worker processes `npm start` runs beside the campaign (workers started on their own: `dartflow workers --env-workers N`, or one per machine).'
      ),
    slotsPerWorker: posInt
      .default(4)
      .describe(
        'Envs (browser contexts) per env worker `npm start` runs (workers started on their own: `dartflow workers --env-slots`, or DARTFLOW_ENV_SLOTS for workers/env-worker.ts). A rollout.envConcurrency below workers × slots leaves slots idle.'
      ),
    remoteEndpoint: z
      .url()
      .optional()
      .describe(
        'kind = remote: the env server (`dartflow env-server`) the env workers `npm start` runs connect to, with the token in DARTFLOW_ENV_TOKEN (workers started on their own: DARTFLOW_ENV_URL).'
      ),
    simulatedProfile: z
      .enum(['fast', 'browser', 'osworld'])
      .default('fast')
      .describe(
        'Latency profile of the simulated env (envs/simulated.ts SIM_PROFILES) in the env workers `npm start` runs (workers started on their own: DARTFLOW_ENV_PROFILE).'
      ),
    simulatedTimeScale: z
      .number()
      .positive()
      .max(1000)
      .default(1)
      .describe(
        'Multiplies every simulated env latency (0.1 runs the OSWorld profile 10× faster, same shape); env workers read it as DARTFLOW_ENV_TIME_SCALE; the campaign scales trainer.simulatedStepSeconds by it too.'
      ),
    episodeHeartbeatTimeoutSeconds: timeoutSeconds(10).describe(
      "Heartbeat timeout of every episode activity (rollouts, demonstrations, pre-collection, evaluations, rollout gates): an episode whose env worker died (kill -9, a lost machine) is retried on another worker after this long. A live episode keeps its attempt alive through long env operations (an OSWorld reset of minutes, a slow VLM call): it heartbeats every step and in between (the server hears from it every 0.8 of this timeout), so a hung env operation is ended by the env's own operation timeouts and the episode's 15-minute start-to-close timeout, not by this one. Temporal caps it at that start-to-close timeout."
    ),
  })
  .describe('The env cluster.');

export const EvalSchema = z
  .strictObject({
    everyVersions: posInt.default(5).describe('Evaluate every this many new policy versions.'),
    sparseEveryVersions: posInt
      .nullable()
      .default(null)
      .describe(
        "While the training success of some held-out family (its tasks' last 16 rollout episodes, temperature 1) is below eval.sparseBelowRolloutSuccess, evaluate only every this many versions instead of eval.everyVersions: those evaluations only draw the curve far from the target, and their episodes go to RL instead (the behaviour-cloned version, the RL start point, is evaluated at once either way). null = always eval.everyVersions."
      ),
    sparseBelowRolloutSuccess: prob
      .default(0.7)
      .describe(
        'The training success below which eval.sparseEveryVersions applies (a family without rollout episodes yet counts as below).'
      ),
    nearTargetEveryVersions: posInt
      .nullable()
      .default(null)
      .describe(
        'Once the last evaluation has every family within eval.nearTargetMargin of campaign.targetSuccess (greedy), evaluate every this many versions instead (when fewer): near the target, the wait for the next evaluation is what is left of the campaign once the policy is good enough. null = the usual cadence.'
      ),
    nearTargetMargin: prob
      .default(0.1)
      .describe(
        'How close to campaign.targetSuccess every family of the last evaluation must be for eval.nearTargetEveryVersions.'
      ),
    episodesPerTask: posInt.default(20).describe('Held-out greedy episodes per task family.'),
    sampledEpisodesPerTask: posInt
      .nullable()
      .default(null)
      .describe(
        'Held-out temperature-1 episodes per task family, run beside the greedy ones on the first of the same seeds (null = episodesPerTask). Only greedy success drives the stop rule and the gate, so fewer here leave more env time to RL.'
      ),
    gateMinSuccessDrop: prob
      .default(0.2)
      .describe(
        'Model-rollout gate: refuse a version whose canary success drops by more than this (plus 2σ of the gate sample).'
      ),
    gateEveryVersions: z
      .number()
      .int()
      .nonnegative()
      .default(1)
      .describe('Gate every this many versions on the canary (0 = never).'),
    gateEpisodesPerTask: posInt.default(8).describe('Greedy episodes per held-out task in the canary gate.'),
  })
  .describe('Held-out evaluation and the model-rollout gate.');

/** The sections of CampaignConfig by name (docs and error messages walk these). */
export const CONFIG_SECTIONS = {
  campaign: CampaignSectionSchema,
  rollout: RolloutSchema,
  curation: CurationSchema,
  trainer: TrainerSchema,
  policy: PolicySchema,
  env: EnvSchema,
  eval: EvalSchema,
} as const;

export const CampaignConfigSchema = z
  .strictObject({
    campaign: CampaignSectionSchema.default(CampaignSectionSchema.parse({})),
    rollout: RolloutSchema.default(RolloutSchema.parse({})),
    curation: CurationSchema.default(CurationSchema.parse({})),
    trainer: TrainerSchema.default(TrainerSchema.parse({})),
    policy: PolicySchema.default(PolicySchema.parse({})),
    env: EnvSchema.default(EnvSchema.parse({})),
    eval: EvalSchema.default(EvalSchema.parse({})),
  })
  .strict()
  .superRefine((cfg, ctx) => {
    if (cfg.rollout.nMin > cfg.rollout.nMax) {
      ctx.addIssue({
        code: 'custom',
        path: ['rollout', 'nMin'],
        message: `must be ≤ rollout.nMax (${cfg.rollout.nMax})`,
      });
    }
    if (cfg.rollout.taskTurns === 'signal' && cfg.rollout.solvedTaskEvery > 1) {
      ctx.addIssue({
        code: 'custom',
        path: ['rollout', 'solvedTaskEvery'],
        message:
          "is a round-robin rule; rollout.taskTurns 'signal' already gives a solved task fewer turns: set rollout.solvedTaskEvery: 1 or rollout.taskTurns: round-robin",
      });
    }
    if (cfg.trainer.minGroups > cfg.trainer.maxGroups) {
      ctx.addIssue({
        code: 'custom',
        path: ['trainer', 'minGroups'],
        message: `must be ≤ trainer.maxGroups (${cfg.trainer.maxGroups})`,
      });
    }
    // policy.vlmEndpoint is no longer required for a VLM (the campaign uses the registered vLLM roles).
    if (cfg.policy.kind !== 'vlm' && cfg.policy.options && Object.keys(cfg.policy.options).length > 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['policy', 'options'],
        message:
          'holds UI-TARS options, which apply only when policy.kind is "vlm": set policy.kind: vlm or remove them',
      });
    }
    // The VLM trainer (python/dartflow_vlm) takes one optimiser step per train step: there is no later
    // minibatch update for targetKl to stop, and the Python worker refuses it; say so before a campaign starts.
    if (cfg.policy.kind === 'vlm' && cfg.trainer.targetKl !== null) {
      ctx.addIssue({
        code: 'custom',
        path: ['trainer', 'targetKl'],
        message:
          'applies only to the embedded trainer (it stops later minibatch updates; the VLM trainer makes one update per step): set trainer.targetKl: null and anchor with trainer.klBeta',
      });
    }
    for (const option of ARCHITECTURE_OPTIONS) {
      if (cfg.policy.kind === 'vlm' && cfg.policy[option]) {
        ctx.addIssue({
          code: 'custom',
          path: ['policy', option],
          message: "is an option of the embedded CNN; a VLM campaign's network is the VLM itself: remove it",
        });
      }
    }
    if (cfg.policy.kind === 'vlm' && cfg.trainer.demoAnchorCoef > 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['trainer', 'demoAnchorCoef'],
        message:
          'applies only to the embedded trainer (the VLM trainer has no demonstration anchor): set trainer.demoAnchorCoef: 0 and anchor with trainer.klBeta',
      });
    }
    if (cfg.policy.kind !== 'vlm' && cfg.trainer.demoAnchorCoef > 0 && cfg.policy.bcWarmStartEpisodes === 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['trainer', 'demoAnchorCoef'],
        message:
          'anchors RL to the behaviour-cloning demonstrations, and this campaign has none: set policy.bcWarmStartEpisodes > 0 or trainer.demoAnchorCoef: 0',
      });
    }
    if (cfg.env.kind === 'remote' && !cfg.env.remoteEndpoint) {
      ctx.addIssue({
        code: 'custom',
        path: ['env', 'remoteEndpoint'],
        message: 'is required when env.kind is "remote"',
      });
    }
  });

export type CampaignConfig = z.infer<typeof CampaignConfigSchema>;
export type CampaignConfigInput = z.input<typeof CampaignConfigSchema>;
