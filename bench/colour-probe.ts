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
 * Run: npx tsx bench/colour-probe.ts collect            (Chromium; caches screens in .data/bench/colour-probe)
 *      npx tsx bench/colour-probe.ts rl [--spec default|colourfilm] [--seeds 1,2,3] [--episodes 2000]
 *           [--lr 0.003] [--groups 8] [--n 8] [--demos 16] [--bc-epochs 4] [--eval-every 250] [--out file]
 *           [--entropy-coef 0] [--epochs 2] [--families click-colour[,click-target]]
 *      npx tsx bench/colour-probe.ts render             (a few observations at the policy's 64×64 input, PNG)
 *      npx tsx bench/colour-probe.ts report a.json b.json  (markdown table of saved runs)
 */
import fs from 'node:fs';
import path from 'node:path';
import { PNG } from 'pngjs';
import {
  adamStep,
  computeLoss,
  createAdamState,
  createPrng,
  highEntropyMask,
  shuffled,
  stepAdvantages,
  type AdamState,
  type LossSample,
} from '../algorithms';
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
  type PolicySpec,
} from '../policy/spec';
import { initWeights, type PolicyWeights } from '../policy/weights';
import { TrainerSchema } from '../schemas/config';

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
  if (name === 'v2') return defaultPolicySpec;
  if (name === 'v3') return clickQueryPolicySpec;
  const mod = (await import('../policy/spec')) as unknown as Record<string, PolicySpec>;
  const s = mod[`${name}PolicySpec`];
  if (!s) throw new Error(`no spec ${name}PolicySpec in policy/spec.ts`);
  return s;
}

async function rl(args: string[]): Promise<void> {
  const specName = arg(args, '--spec', 'default');
  const spec = await loadSpec(specName);
  const seeds = arg(args, '--seeds', '1').split(',').map(Number);
  const maxEpisodes = Number(arg(args, '--episodes', '2000'));
  const families = arg(args, '--families', 'click-colour').split(',');
  const lr = Number(arg(args, '--lr', '0.003'));
  const groups = Number(arg(args, '--groups', '8'));
  const n = Number(arg(args, '--n', '8'));
  const demos = Number(arg(args, '--demos', '16'));
  const bcEpochs = Number(arg(args, '--bc-epochs', '4'));
  const evalEvery = Number(arg(args, '--eval-every', '250'));
  const heldN = Number(arg(args, '--eval', '128'));
  const out = arg(args, '--out', '');
  const entropyCoef = Number(arg(args, '--entropy-coef', '0'));
  const epochs = Number(arg(args, '--epochs', '2'));
  const trainer = TrainerSchema.parse({ learningRate: lr, klBeta: 0, epochs, entropyCoef });
  console.log(
    `spec ${specName} (${paramCount(spec)} params), lr ${lr}, epochs ${epochs}, entropy coef ${entropyCoef}, ${groups} groups × n=${n}, families ${families}`
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
    const optimizer: AdamState = bcOpt; // carried over (the quickstart default)
    const curve: EvalPoint[] = [];
    const stepsLog: Array<Record<string, number>> = [];
    let episodes = 0;
    const log = (p: EvalPoint) => {
      curve.push(p);
      const fam = Object.keys(p.greedy)
        .map(
          (f) =>
            `${f} ${(p.greedy[f]! * 100).toFixed(0)}/${(p.sampled[f]! * 100).toFixed(0)} H=${p.entropy[f]!.toFixed(2)}`
        )
        .join(' | ');
      console.log(
        `seed ${seed} ep ${p.episodes}: greedy/T1 ${fam} | colour sens ${(p.sensitivity * 100).toFixed(0)}% tv ${p.tv.toFixed(2)} mass target ${p.massTarget.toFixed(2)} other ${p.massOther.toFixed(2)}`
      );
    };
    log(await evaluate(sess, w, held, 0));
    let nextEval = evalEvery;
    let round = 0;
    while (episodes < maxEpisodes) {
      round++;
      const eps: Array<{ enc: Enc; groupId: string; trajectoryId: string; seed: number }> = [];
      for (let gi = 0; gi < groups; gi++) {
        const f = families[(round * groups + gi) % families.length]!;
        const enc = train[f]![Math.floor(rng.next() * train[f]!.length)]!;
        for (let k = 0; k < n; k++)
          eps.push({
            enc,
            groupId: `r${round}g${gi}`,
            trajectoryId: `r${round}g${gi}e${k}`,
            seed: Math.floor(rng.next() * 1e9),
          });
      }
      episodes += eps.length;
      const ro = await rollout(sess, w, eps, { greedy: false, maxSteps: 4 });
      // Curation: a group whose rewards are all equal has no signal (skipped, as selectTrainBatch does).
      const byGroup = new Map<string, number[]>();
      eps.forEach((e, i) => byGroup.set(e.groupId, [...(byGroup.get(e.groupId) ?? []), ro.rewards[i]!]));
      const live = new Set([...byGroup].filter(([, r]) => Math.min(...r) !== Math.max(...r)).map(([g]) => g));
      const samples = ro.samples.filter((s) => live.has(s.groupId));
      const stat: Record<string, number> = {
        round,
        groups: byGroup.size,
        signalGroups: live.size,
        successRate: ro.rewards.reduce((a, b) => a + b, 0) / ro.rewards.length,
        samples: samples.length,
      };
      if (samples.length > 0) {
        const rowsAll = samples.map((s) => row(spec, s.enc, s.prev));
        const A = numActions(spec);
        const old = await forward(sess, w, rowsAll);
        const logpOld = samples.map((s, i) => old.logp[i * A + s.action]!);
        const adv = stepAdvantages(samples, { statisticsOver: trainer.advantageStatistics }).advantages;
        const sel = highEntropyMask(old.entropy, { topFraction: trainer.entropyTopFraction });
        let absG = 0;
        for (let epoch = 0; epoch < trainer.epochs; epoch++) {
          const order = shuffled(
            samples.map((_, i) => i),
            rng
          );
          for (let s0 = 0; s0 < order.length; s0 += trainer.minibatchSize) {
            const idx = order.slice(s0, s0 + trainer.minibatchSize);
            const rows = idx.map((i) => rowsAll[i]!);
            const now = await forward(sess, w, rows);
            const ls: LossSample[] = idx.map((i, j) => ({
              logp: now.logp[j * A + samples[i]!.action]!,
              logpOld: logpOld[i]!,
              logpBehaviour: samples[i]!.logpBehaviour,
              logpRef: null,
              advantage: adv[i]!,
              entropy: now.entropy[j]!,
            }));
            const mbSel = idx.map((i) => sel[i]!);
            const nSel = mbSel.reduce((a, b) => a + b, 0);
            if (nSel === 0) continue;
            const loss = computeLoss(ls, { ...trainer, useKl: false }, { selectionMask: mbSel, normalizer: nSel });
            for (const g of loss.gradLogp) absG += Math.abs(g);
            const { grads } = await sess.gradients(w, {
              ...packBatch(spec, rows),
              actions: idx.map((i) => samples[i]!.action),
              g: Float32Array.from(loss.gradLogp),
              entCoef: Float32Array.from(loss.gradEntropy),
            });
            const st = adamStep(w, grads, optimizer, {
              learningRate: trainer.learningRate,
              beta1: trainer.adamBeta1,
              beta2: trainer.adamBeta2,
              weightDecay: trainer.weightDecay,
              maxGradNorm: trainer.gradClip,
            });
            stat.gradNorm = (stat.gradNorm ?? 0) + st.gradNorm;
            stat.updates = (stat.updates ?? 0) + 1;
          }
        }
        stat.meanAbsG = absG / (samples.length * trainer.epochs);
      }
      stepsLog.push(stat);
      if (episodes >= nextEval || episodes >= maxEpisodes) {
        nextEval += evalEvery;
        log(await evaluate(sess, w, held, episodes));
        const recent = stepsLog.slice(-Math.ceil(evalEvery / (groups * n)));
        const sum = (k: string) => recent.reduce((a, s) => a + (s[k] ?? 0), 0);
        console.log(
          `   rounds ${recent.length}: groups with signal ${sum('signalGroups')}/${sum('groups')}, rollout success ${((sum('successRate') / recent.length) * 100).toFixed(0)}%, grad norm ${(sum('gradNorm') / Math.max(1, sum('updates'))).toFixed(3)}`
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
        { spec: specName, lr, epochs, entropyCoef, groups, n, demos, bcEpochs, families, results },
        null,
        1
      )
    );
  }
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
        : rl(rest);
run.catch((e) => {
  console.error(e);
  process.exit(1);
});
