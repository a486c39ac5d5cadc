/**
 * The campaign state that continue-as-new carries, as a versioned zod schema: every run validates what it
 * receives (a bad or foreign state fails loudly, naming the field, instead of running on garbage) and
 * migrates older shapes, so a campaign started by an older build continues under a newer one.
 *
 * Version 1 (before the lineage): numeric versions only, buffer of full group summaries, per-task
 * outcome windows, no child refs. Version 2: lineage, compact buffer, train/rollout/eval child refs,
 * pending rollout and live endpoints in the state.
 *
 * Pure and Node-free (workflows import it).
 */
import { z } from 'zod';
import { CampaignConfigSchema } from '../../schemas/config';
import { GroupSummarySchema, PolicyEndpointSchema } from '../../schemas/campaign';
import { ROOT_PARENT, type Lineage } from './lineage';
import { STATS_WINDOW, toBufferedGroup, type CampaignState } from './campaign-state';

export const CAMPAIGN_STATE_VERSION = 2;

/** Above this the state goes to MinIO and continue-as-new carries its key (Temporal payloads stay small). */
export const STATE_INLINE_LIMIT_BYTES = 256 * 1024;

const int = z.number().int();
const version = int.min(0);

const TaskRefSchema = z.object({
  id: z.string().min(1),
  family: z.string(),
  spec: z.looseObject({ id: z.string() }),
  trainSeeds: z.object({ from: int, to: int }),
  maxSteps: int.positive(),
});

const TaskStatsSchema = z.object({
  taskId: z.string(),
  recentRewards: z.array(z.number()),
  episodes: int.min(0),
  successes: int.min(0),
  lastN: int.min(0),
  longestSuccess: int.min(0),
  hard: z.boolean(),
  quarantined: z.boolean(),
  poolSize: int.min(0),
  turnsPassed: int.min(0).optional(),
  turnCredit: z.number().optional(),
  recentGroupsTaught: z
    .array(z.union([z.literal(0), z.literal(1)]))
    .max(64)
    .optional(),
});

const EvalPointSchema = z.object({
  version,
  successRate: z.number(),
  episodes: int.min(0),
  atEpisodes: int.min(0),
  atMs: z.number(),
  perFamily: z.record(z.string(), z.number()),
  // Temperature-1 evaluation next to the greedy one (issue 14.6) and greedy episodes per family; optional.
  sampledSuccessRate: z.number().optional(),
  sampledPerFamily: z.record(z.string(), z.number()).optional(),
  sampledEpisodes: int.min(0).optional(),
  episodesPerFamily: z.record(z.string(), int.min(0)).optional(),
});

const ChildRefShape = { workflowId: z.string().min(1), startedAtMs: z.number(), run: int.min(0) };

const BufferedGroupSchema = z.object({
  groupId: z.string(),
  taskId: z.string(),
  trajectories: z.array(
    z.object({
      trajectoryId: z.string(),
      reward: z.number(),
      numSteps: int.min(0),
      minPolicyVersion: version,
      maxPolicyVersion: version,
      injectedFromPool: z.boolean(),
      manifestKey: z.string().optional(),
    })
  ),
});

const PHASES = [
  'starting',
  'warm-start',
  'precollecting',
  'running',
  'paused',
  'draining',
  'completed',
  'failed',
] as const;

export const CampaignStateSchema = z.object({
  schemaVersion: z.literal(CAMPAIGN_STATE_VERSION),
  campaignId: z.string().min(1),
  config: CampaignConfigSchema,
  tasks: z.array(TaskRefSchema),
  heldOut: z.array(TaskRefSchema),
  phase: z.enum(PHASES),
  paused: z.boolean(),
  stopRequested: z.boolean(),
  startedAtMs: z.number(),
  runIndex: int.min(0),
  cursor: int.min(0),
  groupSeq: int.min(0),
  stats: z.record(z.string(), TaskStatsSchema),
  buffer: z.array(BufferedGroupSchema),
  inFlight: z.record(
    z.string(),
    z.object({ groupId: z.string(), taskId: z.string(), n: int.positive(), startedAtMs: z.number(), run: int.min(0) })
  ),
  policyVersion: version,
  referenceVersion: version,
  lineage: z.record(z.string().regex(/^\d+$/, 'lineage keys are version numbers'), int.min(ROOT_PARENT)),
  servedVersions: z.record(z.string(), version),
  endpoints: z.array(PolicyEndpointSchema),
  pinnedVersion: version.nullable(),
  train: z
    .object({
      ...ChildRefShape,
      trainStep: int.positive(),
      fromVersion: version,
      groups: z.array(z.object({ groupId: z.string(), taskId: z.string(), trajectoryIds: z.array(z.string()) })),
    })
    .nullable(),
  rollout: z.object({ ...ChildRefShape, version }).nullable(),
  evaluation: z.object({ ...ChildRefShape, version }).nullable(),
  pendingRollout: version.nullable(),
  rolloutsSinceEval: int.min(0),
  trainSteps: int.min(0),
  episodes: int.min(0),
  infraFailures: int.min(0),
  staleDropped: int.min(0),
  rolledBack: int.min(0),
  abandonedVersions: int.min(0),
  evals: z.array(EvalPointSchema),
  lastEvalVersion: int.min(-1),
  consumedCount: int.min(0),
});

/** The version-1 shape (builds before the lineage), only as far as migration reads it. */
const CampaignStateV1Schema = z.looseObject({
  campaignId: z.string().min(1),
  config: CampaignConfigSchema,
  policyVersion: version,
  buffer: z.array(GroupSummarySchema),
  inFlight: z.record(z.string(), z.looseObject({ groupId: z.string(), taskId: z.string(), n: int.positive() })),
  outcomes: z.record(z.string(), z.array(z.object({ reward: z.number().nullable(), numSteps: int.min(0) }))).optional(),
  stats: z.record(z.string(), TaskStatsSchema),
  runIndex: int.min(0),
});

export class CampaignStateError extends Error {
  override name = 'CampaignStateError';
}

function describeIssues(err: z.ZodError): string {
  return err.issues
    .slice(0, 8)
    .map((i) => `field "${i.path.join('.') || '(root)'}": ${i.message}`)
    .join('; ');
}

/** Version 1 → 2: a linear lineage 0 … head (v1 numbered versions max + 1), compact buffer, no child refs. */
export function migrateV1(raw: unknown): CampaignState {
  const parsed = CampaignStateV1Schema.safeParse(raw);
  if (!parsed.success)
    throw new CampaignStateError(`carried campaign state (v1) is invalid: ${describeIssues(parsed.error)}`);
  const v1 = parsed.data;
  const lineage: Lineage = { '0': ROOT_PARENT };
  for (let v = 1; v <= v1.policyVersion; v++) lineage[String(v)] = v - 1;
  const stats = Object.fromEntries(
    Object.entries(v1.stats).map(([id, st]) => {
      const longest = Math.max(
        st.longestSuccess,
        ...(v1.outcomes?.[id] ?? []).filter((o) => (o.reward ?? 0) > 0).map((o) => o.numSteps)
      );
      return [id, { ...st, longestSuccess: longest, recentRewards: st.recentRewards.slice(-STATS_WINDOW) }];
    })
  );
  const { outcomes: _outcomes, ...rest } = v1 as typeof v1 & Record<string, unknown>;
  const state = {
    ...rest,
    schemaVersion: CAMPAIGN_STATE_VERSION,
    stats,
    buffer: v1.buffer.map((g) => toBufferedGroup(v1.campaignId, g)),
    inFlight: Object.fromEntries(
      Object.entries(v1.inFlight).map(([id, g]) => [
        id,
        { groupId: g.groupId, taskId: g.taskId, n: g.n, startedAtMs: Number(g.startedAtMs ?? 0), run: v1.runIndex },
      ])
    ),
    lineage,
    endpoints: [],
    train: null,
    rollout: null,
    evaluation: null,
    pendingRollout: null,
    rolloutsSinceEval: 0,
    abandonedVersions: 0,
  };
  return validateCampaignState(state);
}

/** Validates a carried state of the current version (or migrates an older one); throws CampaignStateError. */
export function loadCarriedState(raw: unknown): CampaignState {
  const v = (raw as { schemaVersion?: unknown } | null)?.schemaVersion;
  if (v === undefined) return migrateV1(raw);
  if (v !== CAMPAIGN_STATE_VERSION)
    throw new CampaignStateError(
      `carried campaign state has schemaVersion ${String(v)}; this build reads ${CAMPAIGN_STATE_VERSION} (and migrates 1). ` +
        'Deploy a build that knows it, or start a new campaign.'
    );
  return validateCampaignState(raw);
}

export function validateCampaignState(raw: unknown): CampaignState {
  const parsed = CampaignStateSchema.safeParse(raw);
  if (!parsed.success)
    throw new CampaignStateError(`carried campaign state is invalid: ${describeIssues(parsed.error)}`);
  return parsed.data as CampaignState;
}

/** JSON size of the state in bytes (what continue-as-new would carry inline). */
export function stateBytes(s: CampaignState): number {
  let n = 0;
  const json = JSON.stringify(s);
  for (let i = 0; i < json.length; i++) {
    const c = json.charCodeAt(i);
    // UTF-8 length: a surrogate pair (4 bytes) counts 4 on its high half and 0 on its low half.
    n += c < 0x80 ? 1 : c < 0x800 ? 2 : c >= 0xd800 && c < 0xdc00 ? 4 : c >= 0xdc00 && c < 0xe000 ? 0 : 3;
  }
  return n;
}
