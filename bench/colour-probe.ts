/**
 * Why does click-colour learn so slowly under RL? (issue 14, follow-up of the 14.3 blocker.)
 *
 * An offline probe: click-colour and click-target episodes are one-screen tasks (a click on a box ends the
 * episode, anything else leaves the screen unchanged), so a set of reset screenshots from the real Chromium
 * pages plus a per-cell outcome map ("which box does a click on this cell's centre hit") replays every
 * episode exactly, with no browser in the loop. On top of that replay the probe runs the trainer's own
 * pieces in process — initWeights, the ONNX train session, stepAdvantages (per-step statistics),
 * highEntropyMask, computeLoss (PPO clip, dual clip), adamStep — the way activities/trainer/train-step.ts
 * combines them: a weak BC start (oracle demos, few epochs, one Adam update per epoch), then GRPO rounds of
 * `groups` groups × n rollouts (max 4 steps, previous action fed back), 2 epochs, minibatch 64.
 *
 * Diagnostics per evaluation (held-out seeds, exact): greedy and temperature-1 success, mean click entropy,
 * "instruction sensitivity" (how often the greedy box changes when only the colour word changes, and the
 * mean total-variation distance between the click distributions under two colour words), the click-mass
 * on the target box vs on other boxes, and per train step the share of groups with non-zero advantage.
 *
 * The RL update is the trainer's own function (activities/trainer/grpo-update.ts), so every trainer field applies
 * (`--set rlLearningRate=0.001 --set klBeta=0.05 …`); `--dynamic` gives each family DART's dynamic rollout number
 * from its last 8 rewards, as planNextGroup does. Each evaluation also reports ‖W_q‖, the exact KL(π ‖ π_BC) and
 * the greedy first-step action kinds (named box / other box / background / token).
 *
 * Run: npx tsx bench/colour-probe.ts collect            (Chromium; caches screens in .data/bench/colour-probe)
 *      npx tsx bench/colour-probe.ts rl [--spec default|v2|v3] [--seeds 1,2,3] [--episodes 2000]
 *           [--lr 0.003] [--groups 8] [--n 8 | --dynamic] [--demos 16] [--bc-epochs 4] [--eval-every 250]
 *           [--entropy-coef 0] [--epochs 2] [--families click-colour[,click-target]] [--solved-every 1] [--pool off|task|instruction] [--set field=value …] [--out file]
 *      npx tsx bench/colour-probe.ts campaign <campaignId> [--ref 1]   (a real campaign's checkpoints and ledger)
 *      npx tsx bench/colour-probe.ts colours <campaignId>   (a real campaign's click-colour success per named colour)
 *      npx tsx bench/colour-probe.ts render             (a few observations at the policy's 64×64 input, PNG)
 *      npx tsx bench/colour-probe.ts report a.json b.json  (markdown table of saved runs)
 */
import fs from 'node:fs';
import path from 'node:path';
import { PNG } from 'pngjs';
import {
  adamStep,
  createAdamState,
  createPrng,
  dynamicRolloutNumber,
  isSolvedTask,
  shuffled,
  takesTurn,
  type AdamState,
} from '../algorithms';
import { grpoUpdate } from '../activities/trainer/grpo-update';
import { actionMask, indexFromAction } from '../policy/action-space';
import { encodeInstruction, encodePreviousAction, encodeScreenshot } from '../policy/observation';
import { sampleAction } from '../policy/sampling';
import { createTrainSession, packBatch, type ObservationRow, type PolicyTrainSession } from '../policy/session';
import {
  clickQueryPolicySpec,
  defaultPolicySpec,
  numActions,
  numCells,
  paramCount,
  v2PolicySpec,
  type PolicySpec,
} from '../policy/spec';
import { initWeights, type PolicyWeights } from '../policy/weights';
import { RolloutSchema, TrainerSchema } from '../schemas/config';

const DIR = path.resolve('.data/bench/colour-probe');
const W = 160;
const G = 16;
const COLOURS: Array<[string, number, number, number]> = [
  ['red', 0xe6, 0x19, 0x4b],
  ['green', 0x3c, 0xb4, 0x4b],
  ['blue', 0x43, 0x63, 0xd8],
  ['yellow', 0xff, 0xe1, 0x19],
  ['orange', 0xf5, 0x82, 0x31],
  ['purple', 0x91, 0x1e, 0xb4],
  ['cyan', 0x42, 0xd4, 0xf4],
  ['black', 0, 0, 0],
];

/** One reset screen: what the policy sees and what a click on each of the 256 cells does. */
interface Screen {
  family: 'click-colour' | 'click-target';
  seed: number;
  instruction: string;
  fields: string[];
  png: string; // base64
  /** Per cell: 1 = success, 0 = ends the episode as a failure, -1 = nothing happens. */
  outcome: number[];
  /** Per cell: the colour name of the box under the cell centre ('' for background). */
  colourAt: string[];
  oracleCell: number;
}

function cellPixel(img: PNG, cell: number): [number, number, number] {
  const r = Math.floor(cell / G);
  const c = cell % G;
  const x = Math.floor(((c + 0.5) / G) * img.width);
  const y = Math.floor(((r + 0.5) / G) * img.height);
  const p = (y * img.width + x) * 4;
  return [img.data[p]!, img.data[p + 1]!, img.data[p + 2]!];
}

function colourName([r, g, b]: [number, number, number]): string {
  for (const [name, cr, cg, cb] of COLOURS)
    if (Math.abs(r - cr) + Math.abs(g - cg) + Math.abs(b - cb) < 12) return name;
  return '';
}

async function collect(): Promise<void> {
  const { BrowserEnvPool } = await import('../envs');
  const { loadInfraSettings } = await import('../infra/settings');
  const { loadTask } = await import('../tasks/loader');
  const settings = loadInfraSettings();
  const pool = new BrowserEnvPool({ slots: 2, executablePath: settings.chromiumPath });
  fs.mkdirSync(DIR, { recursive: true });
  try {
    for (const family of ['click-colour', 'click-target'] as const) {
      const task = loadTask(family);
      for (const split of ['train', 'heldOut'] as const) {
        const count = split === 'train' ? 800 : 200;
        const { from } = task.seeds[split];
        const screens: Screen[] = [];
        const env = await pool.acquire();
        for (let i = 0; i < count; i++) {
          const seed = from + (split === 'heldOut' ? i * 97 : i * 13);
          const res = await env.reset(task, seed);
          const img = PNG.sync.read(Buffer.from(res.observation.png));
          if (img.width !== W) throw new Error(`screen ${img.width}px`);
          const oracle = await env.oracle!();
          const oracleCell = indexFromAction(defaultPolicySpec, oracle!, { fields: res.fields })!;
          const colourAt: string[] = [];
          const outcome: number[] = [];
          let bbox: [number, number, number, number] | null = null;
          if (family === 'click-target') {
            // One button on white: its bounding box of non-white pixels.
            for (let y = 0; y < img.height; y++)
              for (let x = 0; x < img.width; x++) {
                const p = (y * img.width + x) * 4;
                if (img.data[p]! + img.data[p + 1]! + img.data[p + 2]! < 3 * 250) {
                  bbox = bbox
                    ? [Math.min(bbox[0], x), Math.min(bbox[1], y), Math.max(bbox[2], x), Math.max(bbox[3], y)]
                    : [x, y, x, y];
                }
              }
          }
          const target = res.fields[0]!;
          for (let cell = 0; cell < G * G; cell++) {
            const name = colourName(cellPixel(img, cell));
            colourAt.push(name);
            if (family === 'click-colour') outcome.push(name === '' ? -1 : name === target ? 1 : 0);
            else {
              const x = Math.floor((((cell % G) + 0.5) / G) * W);
              const y = Math.floor(((Math.floor(cell / G) + 0.5) / G) * W);
              outcome.push(bbox && x >= bbox[0] && x <= bbox[2] && y >= bbox[1] && y <= bbox[3] ? 1 : -1);
            }
          }
          if (outcome[oracleCell] !== 1)
            console.warn(`${family} seed ${seed}: oracle cell ${oracleCell} not a success`);
          screens.push({
            family,
            seed,
            instruction: res.instruction,
            fields: res.fields,
            png: Buffer.from(res.observation.png).toString('base64'),
            outcome,
            colourAt,
            oracleCell,
          });
        }
        await pool.release(env);
        fs.writeFileSync(path.join(DIR, `${family}-${split}.json`), JSON.stringify(screens));
        console.log(`${family} ${split}: ${screens.length} screens`);
      }
    }
  } finally {
    await pool.close();
  }
}

function load(family: string, split: string): Screen[] {
  return JSON.parse(fs.readFileSync(path.join(DIR, `${family}-${split}.json`), 'utf8')) as Screen[];
}

/** Encoded screen (cached per spec). */
interface Enc {
  s: Screen;
  obs: Float32Array;
  text: Float32Array;
  mask: Float32Array;
}
function encode(spec: PolicySpec, s: Screen, instruction = s.instruction): Enc {
  return {
    s,
    obs: encodeScreenshot(Buffer.from(s.png, 'base64'), spec),
    text: encodeInstruction(instruction, spec),
    mask: actionMask(spec, { numFields: s.fields.length }),
  };
}
const row = (spec: PolicySpec, e: Enc, prev: number | null): ObservationRow => ({
  obs: e.obs,
  text: e.text,
  mask: e.mask,
  prev: encodePreviousAction(prev === null ? null : { actionIndex: prev, changed: false }, spec),
});

async function forward(sess: PolicyTrainSession, w: PolicyWeights, rows: ObservationRow[]) {
  const spec = sess.spec;
  const A = numActions(spec);
  const logp = new Float32Array(rows.length * A);
  const entropy = new Float32Array(rows.length);
  for (let i = 0; i < rows.length; i += 64) {
    const part = rows.slice(i, i + 64);
    const r = await sess.forward(w, packBatch(spec, part));
    logp.set(r.logp, i * A);
    entropy.set(r.entropy, i);
  }
  return { logp, entropy, A };
}

interface StepSample {
  enc: Enc;
  prev: number | null;
  action: number;
  logpBehaviour: number;
  groupId: string;
  trajectoryId: string;
  reward: number;
}

/** Runs episodes of all (enc, copies) in lockstep: up to maxSteps, each step a batched forward. */
async function rollout(
  sess: PolicyTrainSession,
  w: PolicyWeights,
  episodes: Array<{ enc: Enc; groupId: string; trajectoryId: string; seed: number }>,
  opts: { greedy: boolean; maxSteps: number }
): Promise<{ rewards: number[]; samples: StepSample[]; clickEntropy: number }> {
  const spec = sess.spec;
  const live = episodes.map((e, i) => ({ i, prev: null as number | null, steps: [] as StepSample[], done: false }));
  const rewards = new Array<number>(episodes.length).fill(0);
  let entSum = 0;
  let entN = 0;
  for (let t = 0; t < opts.maxSteps; t++) {
    const act = live.filter((l) => !l.done);
    if (act.length === 0) break;
    const { logp, entropy, A } = await forward(
      sess,
      w,
      act.map((l) => row(spec, episodes[l.i]!.enc, l.prev))
    );
    act.forEach((l, j) => {
      const lp = logp.subarray(j * A, (j + 1) * A);
      if (t === 0) {
        entSum += entropy[j]!;
        entN++;
      }
      const a = sampleAction(lp, { greedy: opts.greedy, seed: episodes[l.i]!.seed * 31 + t });
      const e = episodes[l.i]!;
      l.steps.push({
        enc: e.enc,
        prev: l.prev,
        action: a.index,
        logpBehaviour: a.logp,
        groupId: e.groupId,
        trajectoryId: e.trajectoryId,
        reward: 0,
      });
      const cells = numCells(spec);
      if (a.index < cells) {
        const o = e.enc.s.outcome[a.index]!;
        if (o >= 0) {
          rewards[l.i] = o;
          l.done = true;
        }
      } else if (a.index === cells + 11) l.done = true; // finished
      l.prev = a.index;
    });
  }
  const samples: StepSample[] = [];
  live.forEach((l) => l.steps.forEach((s) => samples.push({ ...s, reward: rewards[l.i]! })));
  return { rewards, samples, clickEntropy: entN ? entSum / entN : 0 };
}

interface EvalPoint {
  episodes: number;
  greedy: Record<string, number>;
  sampled: Record<string, number>;
  entropy: Record<string, number>;
  /** click-colour: greedy target box changes when only the colour word changes (share of screens). */
  sensitivity: number;
  /** click-colour: mean total-variation distance between click distributions under two present colours. */
  tv: number;
  /** click-colour, first step: probability mass on the target box / on other boxes / on background. */
  massTarget: number;
  massOther: number;
  /** ‖query.weight‖ (spec v3), exact mean KL(π ‖ π_BC) on held-out first steps, greedy first-step kinds. */
  qNorm?: number;
  klRef?: number;
  kinds?: Record<string, { target: number; other: number; background: number; token: number }>;
  /** click-colour: greedy success per named colour (the colour word of the instruction). */
  greedyByColour?: Record<string, number>;
}

async function evaluate(sess: PolicyTrainSession, w: PolicyWeights, held: Record<string, Enc[]>, episodes: number) {
  const spec = sess.spec;
  const p: EvalPoint = {
    episodes,
    greedy: {},
    sampled: {},
    entropy: {},
    sensitivity: 0,
    tv: 0,
    massTarget: 0,
    massOther: 0,
  };
  for (const [family, encs] of Object.entries(held)) {
    const eps = encs.map((enc, i) => ({ enc, groupId: 'eval', trajectoryId: `e${i}`, seed: i + 7 }));
    const g = await rollout(sess, w, eps, { greedy: true, maxSteps: 4 });
    const s = await rollout(sess, w, eps, { greedy: false, maxSteps: 4 });
    p.greedy[family] = g.rewards.reduce((a, b) => a + b, 0) / eps.length;
    if (family === 'click-colour') {
      const by: Record<string, [number, number]> = {};
      encs.forEach((enc, i) => {
        const c = enc.s.fields[0] ?? '?';
        const t = (by[c] ??= [0, 0]);
        t[0] += g.rewards[i]!;
        t[1]++;
      });
      p.greedyByColour = Object.fromEntries(Object.entries(by).map(([c, [ok, n]]) => [c, ok / n]));
    }
    p.sampled[family] = s.rewards.reduce((a, b) => a + b, 0) / eps.length;
    p.entropy[family] = s.clickEntropy;
  }
  // Instruction sensitivity on click-colour: the same screen under each colour present.
  const cc = held['click-colour'];
  if (cc) {
    let changed = 0;
    let tvSum = 0;
    let tvN = 0;
    let mt = 0;
    let mo = 0;
    const cells = numCells(spec);
    for (const enc of cc.slice(0, 100)) {
      const present = [...new Set(enc.s.colourAt.filter((c) => c))];
      const rows = present.map((c) =>
        row(spec, { ...enc, text: encodeInstruction(`Click the ${c} box.`, spec) }, null)
      );
      const { logp, A } = await forward(sess, w, rows);
      const probs = present.map((_, k) => Array.from(logp.subarray(k * A, k * A + cells), Math.exp));
      const boxOf = (k: number) => {
        let best = 0;
        for (let i = 1; i < A; i++) if (logp[k * A + i]! > logp[k * A + best]!) best = i;
        return best < cells ? enc.s.colourAt[best] || 'bg' : 'token';
      };
      const picks = new Set(present.map((_, k) => boxOf(k)));
      if (picks.size > 1) changed++;
      for (let a = 0; a < present.length; a++)
        for (let b = a + 1; b < present.length; b++) {
          let tv = 0;
          for (let i = 0; i < cells; i++) tv += Math.abs(probs[a]![i]! - probs[b]![i]!);
          tvSum += tv / 2;
          tvN++;
        }
      const target = enc.s.fields[0]!;
      const k = present.indexOf(target);
      if (k >= 0)
        for (let i = 0; i < cells; i++) {
          if (enc.s.colourAt[i] === target) mt += probs[k]![i]!;
          else if (enc.s.colourAt[i]) mo += probs[k]![i]!;
        }
    }
    const n = Math.min(100, cc.length);
    p.sensitivity = changed / n;
    p.tv = tvN ? tvSum / tvN : 0;
    p.massTarget = mt / n;
    p.massOther = mo / n;
  }
  return p;
}

const arg = (args: string[], name: string, dflt: string) =>
  args.includes(name) ? args[args.indexOf(name) + 1]! : dflt;

async function loadSpec(name: string): Promise<PolicySpec> {
  if (name === 'default') return defaultPolicySpec;
  // spec v2's network (no instruction query in the click head): the "before" of the comparison.
  if (name === 'v2') return v2PolicySpec;
  if (name === 'v3') return clickQueryPolicySpec;
  const mod = (await import('../policy/spec')) as unknown as Record<string, PolicySpec>;
  const s = mod[`${name}PolicySpec`];
  if (!s) throw new Error(`no spec ${name}PolicySpec in policy/spec.ts`);
  return s;
}

/** `--set key=value` (repeatable): trainer fields over the probe's base (values parsed as JSON, else strings). */
function trainerSets(args: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  args.forEach((a, i) => {
    if (a !== '--set') return;
    const [k, ...rest] = args[i + 1]!.split('=');
    const v = rest.join('=');
    try {
      out[k!] = JSON.parse(v);
    } catch {
      out[k!] = v;
    }
  });
  return out;
}

/** Exact mean KL(π ‖ π_ref) over the action distributions of `rows` (first steps of held-out screens). */
async function exactKl(sess: PolicyTrainSession, w: PolicyWeights, ref: PolicyWeights, rows: ObservationRow[]) {
  const a = await forward(sess, w, rows);
  const b = await forward(sess, ref, rows);
  let sum = 0;
  for (let k = 0; k < rows.length; k++)
    for (let i = 0; i < a.A; i++) {
      const lp = a.logp[k * a.A + i]!;
      if (lp < -50) continue;
      sum += Math.exp(lp) * (lp - Math.max(-50, b.logp[k * a.A + i]!));
    }
  return rows.length ? sum / rows.length : 0;
}

/** Greedy first-step action kinds on held-out screens: the named box / another box / background / a token. */
async function greedyKinds(sess: PolicyTrainSession, w: PolicyWeights, encs: Enc[]) {
  const spec = sess.spec;
  const cells = numCells(spec);
  const { logp, A } = await forward(
    sess,
    w,
    encs.map((e) => row(spec, e, null))
  );
  const kinds = { target: 0, other: 0, background: 0, token: 0 };
  encs.forEach((e, k) => {
    let best = 0;
    for (let i = 1; i < A; i++) if (logp[k * A + i]! > logp[k * A + best]!) best = i;
    if (best >= cells) kinds.token++;
    else if (e.s.outcome[best] === 1) kinds.target++;
    else if (e.s.outcome[best] === 0) kinds.other++;
    else kinds.background++;
  });
  for (const key of Object.keys(kinds) as Array<keyof typeof kinds>) kinds[key] /= Math.max(1, encs.length);
  return kinds;
}

const tensorNorm = (w: PolicyWeights, name: string): number => {
  const t = w[name];
  return t ? Math.sqrt(t.reduce((a, x) => a + x * x, 0)) : 0;
};

async function rl(args: string[]): Promise<void> {
  const specName = arg(args, '--spec', 'default');
  const spec = await loadSpec(specName);
  const seeds = arg(args, '--seeds', '1').split(',').map(Number);
  const maxEpisodes = Number(arg(args, '--episodes', '2000'));
  const families = arg(args, '--families', 'click-colour').split(',');
  const lr = Number(arg(args, '--lr', '0.003'));
  const groups = Number(arg(args, '--groups', '8'));
  const n = Number(arg(args, '--n', '8'));
  const dynamic = args.includes('--dynamic');
  const demos = Number(arg(args, '--demos', '16'));
  const bcEpochs = Number(arg(args, '--bc-epochs', '4'));
  const evalEvery = Number(arg(args, '--eval-every', '250'));
  const heldN = Number(arg(args, '--eval', '128'));
  const out = arg(args, '--out', '');
  const entropyCoef = Number(arg(args, '--entropy-coef', '0'));
  const epochs = Number(arg(args, '--epochs', '2'));
  const solvedEvery = Number(arg(args, '--solved-every', '1'));
  // The campaign's default window (rollout.solvedTaskWindow), not a copy of its value.
  const solvedWindow = RolloutSchema.parse({}).solvedTaskWindow;
  const poolMode = arg(args, '--pool', 'off');
  if (!['off', 'task', 'instruction'].includes(poolMode)) throw new Error('--pool off|task|instruction');
  const sets = trainerSets(args);
  // The probe's base is the pre-issue-14 quickstart trainer (lr 3e-3, 2 epochs, KL 0, carried Adam); --set
  // overrides any trainer field, e.g. --set rlLearningRate=0.001 --set klBeta=0.05 --set targetKl=0.02.
  const trainer = TrainerSchema.parse({ learningRate: lr, klBeta: 0, epochs, entropyCoef, ...sets });
  console.log(
    `spec ${specName} (${paramCount(spec)} params), BC lr ${lr}, trainer ${JSON.stringify({ ...sets, epochs: trainer.epochs, entropyCoef: trainer.entropyCoef, rlLearningRate: trainer.rlLearningRate })}, ${groups} groups × n=${dynamic ? 'dynamic' : n}, families ${families}`
  );
  const train: Record<string, Enc[]> = {};
  const held: Record<string, Enc[]> = {};
  for (const f of families) {
    train[f] = load(f, 'train').map((s) => encode(spec, s));
    held[f] = load(f, 'heldOut')
      .slice(0, heldN)
      .map((s) => encode(spec, s));
  }
  const sess = await createTrainSession(spec);
  const results: Array<{ seed: number; curve: EvalPoint[]; steps: Array<Record<string, number>> }> = [];
  for (const seed of seeds) {
    const rng = createPrng(seed * 7919 + 1);
    const w = initWeights(spec, seed);
    // BC: `demos` oracle demos per family, bcEpochs epochs, one minibatch (≤ 64) per update (as runBehaviourClone).
    const bcRows: Array<{ r: ObservationRow; a: number }> = [];
    for (const f of families)
      for (let i = 0; i < demos; i++) {
        const e = train[f]![(7 + i * 13 + seed * 101) % train[f]!.length]!;
        bcRows.push({ r: row(spec, e, null), a: e.s.oracleCell });
      }
    const bcOpt = createAdamState(w);
    for (let ep = 0; ep < bcEpochs; ep++) {
      const order = shuffled(
        bcRows.map((_, i) => i),
        rng
      );
      for (let s = 0; s < order.length; s += 64) {
        const rows = order.slice(s, s + 64).map((i) => bcRows[i]!);
        const { grads } = await sess.gradients(w, {
          ...packBatch(
            spec,
            rows.map((x) => x.r)
          ),
          actions: rows.map((x) => x.a),
          g: new Float32Array(rows.length).fill(-1 / rows.length),
          entCoef: new Float32Array(rows.length),
        });
        adamStep(w, grads, bcOpt, { learningRate: lr, weightDecay: 0, maxGradNorm: 2 });
      }
    }
    const reference = Object.fromEntries(Object.entries(w).map(([k, v]) => [k, v.slice()])) as PolicyWeights;
    // Carried over from BC (the quickstart default) unless trainer.optimizerReset says otherwise.
    let optimizer: AdamState = trainer.optimizerReset === 'none' ? bcOpt : createAdamState(w);
    const curve: EvalPoint[] = [];
    const stepsLog: Array<Record<string, number>> = [];
    const recent: Record<string, number[]> = Object.fromEntries(families.map((f) => [f, []]));
    let episodes = 0;
    const klRows = Object.values(held)
      .flat()
      .slice(0, 256)
      .map((e) => row(spec, e, null));
    const diagnose = async (p: EvalPoint) => {
      p.qNorm = tensorNorm(w, 'query.weight');
      p.klRef = await exactKl(sess, w, reference, klRows);
      p.kinds = {};
      for (const [f, encs] of Object.entries(held)) p.kinds[f] = await greedyKinds(sess, w, encs);
      return p;
    };
    const log = (p: EvalPoint) => {
      curve.push(p);
      const fam = Object.keys(p.greedy)
        .map(
          (f) =>
            `${f} ${(p.greedy[f]! * 100).toFixed(0)}/${(p.sampled[f]! * 100).toFixed(0)} H=${p.entropy[f]!.toFixed(2)} ` +
            `[${Object.values(p.kinds?.[f] ?? {})
              .map((x) => (x * 100).toFixed(0))
              .join('/')}]`
        )
        .join(' | ');
      console.log(
        `seed ${seed} ep ${p.episodes}: greedy/T1 ${fam} | colours ${Object.entries(p.greedyByColour ?? {})
          .sort()
          .map(([c, x]) => `${c} ${(x * 100).toFixed(0)}`)
          .join(
            ' '
          )} | sens ${(p.sensitivity * 100).toFixed(0)}% tv ${p.tv.toFixed(2)} | |Wq| ${p.qNorm?.toFixed(2)} KL(π‖BC) ${p.klRef?.toFixed(2)}`
      );
    };
    log(await diagnose(await evaluate(sess, w, held, 0)));
    // Round-robin over families as planNextGroup does; with --solved-every k a solved family (its last
    // solvedTaskWindow rollout rewards all successes) takes one turn in k (algorithms/curation.ts takesTurn).
    const pool = new Map<string, StepSample[]>();
    let cursor = 0;
    const passed: Record<string, number> = Object.fromEntries(families.map((f) => [f, 0]));
    const nextFamily = (): string => {
      for (let tries = 0; ; tries++) {
        const f = families[cursor++ % families.length]!;
        if (
          tries + 1 >= families.length ||
          takesTurn(isSolvedTask(recent[f]!, solvedWindow), passed[f]!, solvedEvery)
        ) {
          passed[f] = 0;
          return f;
        }
        passed[f]!++;
      }
    };
    let nextEval = evalEvery;
    let round = 0;
    let lastEvalRound = 0;
    while (episodes < maxEpisodes) {
      round++;
      const eps: Array<{ enc: Enc; groupId: string; trajectoryId: string; seed: number; family: string }> = [];
      for (let gi = 0; gi < groups; gi++) {
        const f = nextFamily();
        const enc = train[f]![Math.floor(rng.next() * train[f]!.length)]!;
        const last = recent[f]!.slice(-8);
        // Dynamic rollout number per family (DART §4.6, as planNextGroup reads the task's recent rewards).
        const groupN = dynamic
          ? dynamicRolloutNumber(last.length ? last.reduce((a, b) => a + b, 0) / last.length : null)
          : n;
        for (let k = 0; k < groupN; k++)
          eps.push({
            enc,
            groupId: `r${round}g${gi}`,
            trajectoryId: `r${round}g${gi}e${k}`,
            seed: Math.floor(rng.next() * 1e9),
            family: f,
          });
      }
      episodes += eps.length;
      const ro = await rollout(sess, w, eps, { greedy: false, maxSteps: 4 });
      eps.forEach((e, i) => recent[e.family]!.push(ro.rewards[i]!));
      // Curation: a group whose rewards are all equal has no signal (skipped, as selectTrainBatch does).
      const byGroup = new Map<string, number[]>();
      eps.forEach((e, i) => byGroup.set(e.groupId, [...(byGroup.get(e.groupId) ?? []), ro.rewards[i]!]));
      const live = new Set([...byGroup].filter(([, r]) => Math.min(...r) !== Math.max(...r)).map(([g]) => g));
      const samples = ro.samples.filter((s) => live.has(s.groupId));
      let injected = 0;
      if (poolMode !== 'off') {
        // DART §4.8 as the campaign does it: successes join the pool (the newest one per key is kept), and a
        // group whose episodes all failed gets the newest pooled success of its key as one more trajectory
        // (its recorded behaviour log-probs, so TIS sees an old policy). Key: the task (family), or the task
        // and the instruction (the colour named), so an all-failed orange group gets an orange success.
        const keyOf = (e: (typeof eps)[number]) =>
          poolMode === 'instruction' ? `${e.family}/${e.enc.s.instruction}` : e.family;
        // One pass over the step samples: per trajectory, and per group (a group shares one screen and key).
        const byTrajectory = new Map<string, StepSample[]>();
        for (const x of ro.samples) byTrajectory.set(x.trajectoryId, [...(byTrajectory.get(x.trajectoryId) ?? []), x]);
        const firstOf = new Map<string, (typeof eps)[number]>();
        for (const e of eps) if (!firstOf.has(e.groupId)) firstOf.set(e.groupId, e);
        for (const [g, r] of byGroup) {
          if (Math.max(...r) > 0) continue;
          const pooled = pool.get(keyOf(firstOf.get(g)!));
          if (!pooled) continue;
          for (const e of eps) if (e.groupId === g) samples.push(...(byTrajectory.get(e.trajectoryId) ?? []));
          samples.push(...pooled.map((x) => ({ ...x, groupId: g, trajectoryId: `${x.trajectoryId}@${g}` })));
          injected++;
        }
        eps.forEach((e, i) => {
          if (ro.rewards[i]! > 0) pool.set(keyOf(e), byTrajectory.get(e.trajectoryId) ?? []);
        });
      }
      const stat: Record<string, number> = {
        round,
        groups: byGroup.size,
        signalGroups: live.size,
        injected,
        successRate: ro.rewards.reduce((a, b) => a + b, 0) / ro.rewards.length,
        samples: samples.length,
      };
      if (samples.length > 0) {
        // The trainer's own update (activities/trainer/grpo-update.ts), as runTrainStep runs it.
        if (trainer.optimizerReset === 'every-step') optimizer = createAdamState(w);
        const upd = await grpoUpdate({
          session: sess,
          spec,
          weights: w,
          optimizer,
          samples: samples.map((s) => ({
            ...row(spec, s.enc, s.prev),
            groupId: s.groupId,
            trajectoryId: s.trajectoryId,
            reward: s.reward,
            action: s.action,
            behaviourLogProb: s.logpBehaviour,
          })),
          trainer,
          referenceWeights: reference,
          rng,
        });
        for (const k of [
          'gradNorm',
          'updates',
          'approxKl',
          'updateNorm',
          'entropyMean',
          'stoppedEarly',
          'kl',
          'clipFraction',
        ])
          stat[k] = k === 'updates' ? upd.metrics.optimizerSteps! : (upd.metrics[k] ?? 0);
      }
      stepsLog.push(stat);
      if (episodes >= nextEval || episodes >= maxEpisodes) {
        nextEval += evalEvery;
        log(await diagnose(await evaluate(sess, w, held, episodes)));
        const since = stepsLog.slice(lastEvalRound);
        lastEvalRound = stepsLog.length;
        const sum = (k: string) => since.reduce((a, s) => a + (s[k] ?? 0), 0);
        const max = (k: string) => since.reduce((a, s) => Math.max(a, s[k] ?? 0), 0);
        console.log(
          `   rounds ${since.length}: groups with signal ${sum('signalGroups')}/${sum('groups')} (+${sum('injected')} by the pool), rollout success ${((sum('successRate') / since.length) * 100).toFixed(0)}%, grad norm ${(sum('gradNorm') / Math.max(1, since.length)).toFixed(3)}, update norm mean ${(sum('updateNorm') / since.length).toFixed(3)} max ${max('updateNorm').toFixed(3)}, approx KL mean ${(sum('approxKl') / since.length).toFixed(4)} max ${max('approxKl').toFixed(4)}, early stops ${sum('stoppedEarly')}, updates ${sum('updates')}`
        );
      }
    }
    results.push({ seed, curve, steps: stepsLog });
  }
  await sess.release();
  if (out) {
    fs.mkdirSync(path.dirname(out), { recursive: true });
    fs.writeFileSync(
      out,
      JSON.stringify(
        {
          spec: specName,
          lr,
          epochs,
          entropyCoef,
          trainer,
          sets,
          dynamic,
          groups,
          n,
          solvedEvery,
          poolMode,
          demos,
          bcEpochs,
          families,
          results,
        },
        null,
        1
      )
    );
  }
}

/**
 * `campaign <campaignId> [--spec v3|v2] [--ref <version>]`: what a real campaign's checkpoints did, read back
 * from its MinIO (DARTFLOW_MINIO_PORT / DARTFLOW_DATA_DIR as for the run): per train step the trainer's
 * metrics from the ledger, and per checkpoint on the probe's held-out screens (first steps) the greedy
 * action kinds per family, the mean click entropy, ‖query.weight‖ and the exact KL(π ‖ π_ref) to the BC start.
 */
async function campaign(args: string[]): Promise<void> {
  const campaignId = args.find((a) => !a.startsWith('--'));
  if (!campaignId) throw new Error('campaign <campaignId>');
  const spec = await loadSpec(arg(args, '--spec', 'default'));
  const { ObjectStore } = await import('../storage/object-store');
  const { loadInfraSettings } = await import('../infra/settings');
  const { keys } = await import('../storage/keys');
  const { LedgerEntrySchema } = await import('../schemas/records');
  const { loadCheckpoint, listCheckpoints } = await import('../activities/trainer/checkpoints');
  const store = ObjectStore.fromSettings(loadInfraSettings());
  const versions = (await listCheckpoints(store, campaignId)).map((m) => m.version).sort((a, b) => a - b);
  const refVersion = Number(arg(args, '--ref', '1'));
  const sess = await createTrainSession(spec);
  const held: Record<string, Enc[]> = {};
  for (const f of ['click-target', 'click-colour'])
    held[f] = load(f, 'heldOut')
      .slice(0, 128)
      .map((s) => encode(spec, s));
  const ref = (await loadCheckpoint(store, campaignId, refVersion, spec)).weights;
  const klRows = Object.values(held)
    .flat()
    .map((e) => row(spec, e, null));
  const ledger = new Map<number, Record<string, number>>();
  for (let step = 1; step <= versions.length + 1; step++) {
    try {
      const e = await store.getJson(keys.ledgerEntry(campaignId, step), LedgerEntrySchema);
      ledger.set(e.toVersion, {
        ...e.metrics,
        consumed: e.consumed.length,
        pooled: e.consumed.filter((c) => c.injectedFromPool).length,
      });
    } catch {
      /* BC step or missing */
    }
  }
  console.log(
    '| version | trajectories (pooled) | samples | optimizer steps | entropy (batch) | grad norm | clip frac | update norm | approx KL | ‖W_q‖ | KL(π‖BC) | held-out H colour / target | greedy colour: named/other/bg/token | greedy target: button/bg/token |'
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const v of versions) {
    const w = (await loadCheckpoint(store, campaignId, v, spec)).weights;
    const m = ledger.get(v) ?? {};
    const h: Record<string, number> = {};
    for (const [f, encs] of Object.entries(held)) {
      const { entropy } = await forward(
        sess,
        w,
        encs.map((e) => row(spec, e, null))
      );
      h[f] = entropy.reduce((a, b) => a + b, 0) / entropy.length;
    }
    const kc = await greedyKinds(sess, w, held['click-colour']!);
    const kt = await greedyKinds(sess, w, held['click-target']!);
    const f2 = (x: number | undefined, d = 2) => (x === undefined ? '–' : x.toFixed(d));
    const pc = (x: number) => (x * 100).toFixed(0);
    console.log(
      `| v${v} | ${m.consumed ?? '–'} (${m.pooled ?? '–'}) | ${m.samples ?? '–'} | ${m.optimizerSteps ?? '–'} | ${f2(m.entropyMean)} | ${f2(m.gradNorm)} | ${f2(m.clipFraction)} | ${f2(m.updateNorm, 3)} | ${f2(m.approxKl, 4)} | ${tensorNorm(w, 'query.weight').toFixed(2)} | ${(await exactKl(sess, w, ref, klRows)).toFixed(2)} | ${h['click-colour']!.toFixed(2)} / ${h['click-target']!.toFixed(2)} | ${pc(kc.target)}/${pc(kc.other)}/${pc(kc.background)}/${pc(kc.token)} | ${pc(kt.target)}/${pc(kt.background)}/${pc(kt.token)} |`
    );
  }
  await sess.release();
}

/**
 * `colours <campaignId>`: a real campaign's click-colour success per named colour, read back from its MinIO
 * (DARTFLOW_MINIO_PORT / DARTFLOW_DATA_DIR as for the run): held-out greedy episodes per evaluated version,
 * and training rollouts per 10 versions. A colour that stays at 0 % is a sub-task with no GRPO signal.
 */
async function colours(args: string[]): Promise<void> {
  const campaignId = args.find((a) => !a.startsWith('--'));
  if (!campaignId) throw new Error('colours <campaignId>');
  const { ObjectStore } = await import('../storage/object-store');
  const { loadInfraSettings } = await import('../infra/settings');
  const { keys } = await import('../storage/keys');
  const { TrajectoryManifestSchema } = await import('../schemas/records');
  const store = ObjectStore.fromSettings(loadInfraSettings());
  const table = async (id: string, bucketOf: (trajectoryId: string, minVersion: number) => string | null) => {
    const rows = new Map<string, Map<string, [number, number]>>();
    const manifests = (await store.list(keys.trajectoryPrefix(id))).filter((k) => k.endsWith('/manifest.json'));
    for (const key of manifests) {
      const m = await store.getJson(key, TrajectoryManifestSchema);
      if (m.taskId !== 'click-colour') continue;
      const bucket = bucketOf(m.trajectoryId, m.minPolicyVersion);
      if (bucket === null) continue;
      const colour = /Click the (\w+) box/.exec(m.instruction)?.[1] ?? '?';
      const row = rows.get(bucket) ?? new Map<string, [number, number]>();
      const cell = row.get(colour) ?? [0, 0];
      cell[0] += m.reward !== null && m.reward > 0 ? 1 : 0;
      cell[1]++;
      row.set(colour, cell);
      rows.set(bucket, row);
    }
    const names = [...new Set([...rows.values()].flatMap((r) => [...r.keys()]))].sort();
    console.log(`| ${id} | ${names.join(' | ')} |\n|---|${names.map(() => '---').join('|')}|`);
    const order = (b: string) => Number(/\d+/.exec(b)?.[0] ?? 0);
    for (const [bucket, row] of [...rows].sort((a, b) => order(a[0]) - order(b[0])))
      console.log(
        `| ${bucket} | ${names.map((c) => (row.get(c) ? `${row.get(c)![0]}/${row.get(c)![1]}` : '–')).join(' | ')} |`
      );
  };
  // Held-out greedy episodes: ids `…-eval-v<version>-…-click-colour-<i>` (the temperature-1 ones end in -t1-<i>).
  await table(`${campaignId}.eval`, (tid) => {
    const m = /-eval-v(\d+)-.*-click-colour-\d+$/.exec(tid);
    return m ? `v${m[1]}` : null;
  });
  await table(campaignId, (_tid, v) => `v${Math.floor(v / 10) * 10}–${Math.floor(v / 10) * 10 + 9}`);
}

async function render(): Promise<void> {
  const screens = load('click-colour', 'heldOut').slice(0, 4);
  const S = defaultPolicySpec.imageSize;
  const scale = 4;
  const out = new PNG({ width: S * scale * screens.length, height: S * scale });
  screens.forEach((s, k) => {
    const x = encodeScreenshot(Buffer.from(s.png, 'base64'), defaultPolicySpec);
    for (let y = 0; y < S * scale; y++)
      for (let xx = 0; xx < S * scale; xx++) {
        const i = Math.floor(y / scale) * S + Math.floor(xx / scale);
        const p = (y * out.width + k * S * scale + xx) * 4;
        for (let c = 0; c < 3; c++) out.data[p + c] = Math.round(x[c * S * S + i]! * 255);
        out.data[p + 3] = 255;
      }
    console.log(`${k}: ${s.instruction}`);
  });
  fs.writeFileSync(path.join(DIR, 'input-64.png'), PNG.sync.write(out));
  console.log(`wrote ${path.join(DIR, 'input-64.png')}`);
}

/** Markdown rows of saved `rl --out` files: per evaluation, means over seeds (per-seed values in brackets). */
function report(files: string[]): void {
  const m = (a: number[]) => a.reduce((x, y) => x + y, 0) / a.length;
  const pc = (a: number[]) => `${m(a).toFixed(0)} (${a.map((x) => x.toFixed(0)).join('/')})`;
  console.log(
    '| run | RL episodes | greedy % | T=1 % | click entropy (nats) | colour word changes greedy box | TV(colour a, colour b) | mass on target / other boxes | groups with signal (since last) |'
  );
  console.log('|---|---|---|---|---|---|---|---|---|');
  for (const f of files) {
    const d = JSON.parse(fs.readFileSync(f, 'utf8')) as {
      spec: string;
      lr: number;
      entropyCoef?: number;
      results: Array<{ curve: EvalPoint[]; steps: Array<Record<string, number>> }>;
    };
    const name = `${d.spec === 'default' ? 'v3' : d.spec}, lr ${d.lr}${d.entropyCoef ? `, entropy ${d.entropyCoef}` : ''}`;
    const rs = d.results;
    let prevEp = 0;
    rs[0]!.curve.forEach((p0, i) => {
      const at = (k: (p: EvalPoint) => number) => rs.map((r) => k(r.curve[i]!));
      let sig = 0;
      let all = 0;
      for (const r of rs)
        r.steps
          .filter((_, j) => (j + 1) * 64 > prevEp && (j + 1) * 64 <= p0.episodes)
          .forEach((s) => {
            sig += s.signalGroups ?? 0;
            all += s.groups ?? 0;
          });
      prevEp = p0.episodes;
      console.log(
        `| ${name} | ${p0.episodes} | ${pc(at((p) => p.greedy['click-colour']! * 100))} | ${pc(at((p) => p.sampled['click-colour']! * 100))} | ${m(at((p) => p.entropy['click-colour']!)).toFixed(2)} | ${m(at((p) => p.sensitivity * 100)).toFixed(0)} % | ${m(at((p) => p.tv)).toFixed(2)} | ${m(at((p) => p.massTarget)).toFixed(2)} / ${m(at((p) => p.massOther)).toFixed(2)} | ${all ? `${sig}/${all}` : '–'} |`
      );
    });
  }
}

const [cmd, ...rest] = process.argv.slice(2);
const run =
  cmd === 'collect'
    ? collect()
    : cmd === 'render'
      ? render()
      : cmd === 'report'
        ? Promise.resolve(report(rest))
        : cmd === 'campaign'
          ? campaign(rest)
          : cmd === 'colours'
            ? colours(rest)
            : rl(rest);
run.catch((e) => {
  console.error(e);
  process.exit(1);
});
