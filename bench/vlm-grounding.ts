/**
 * `npm run bench -- vlm-grounding` (issue 13.4, "what size it needs"): whether a random-init
 * Qwen2-VL-architecture model of each size learns to click a button from behaviour cloning alone, on
 * synthetic click-target screens (python/dartflow_vlm/grounding_probe.py), with dartflow's UI-TARS prompt
 * and the trainer's own behaviour-cloning code. No servers: one Python process per size.
 * Writes vlm-grounding.json and vlm-grounding.png to the bench output directory (docs/bench with --publish).
 * Run: npm run bench -- vlm-grounding [--sizes tiny,small] [--train 256] [--epochs 12] [--lr 2e-3]
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadInfraSettings, PROJECT_ROOT } from '../infra/settings';
import { vlmPython, VLM_VENV } from '../infra/vllm';
import { lineChartSvg, writeSvgAsPng } from '../lib/charts';
import { buildMessages, DART_CONTEXT_LIMITS } from '../vlm/prompt';
import { benchOutDir, shownPath } from './lib/output';

/** The probe's placeholders (grounding_probe.py INSTRUCTION_SLOT, IMAGE_SLOT). */
const INSTRUCTION_SLOT = '@@INSTRUCTION@@';
const IMAGE_SLOT = '@@IMAGE@@';

interface ProbePoint {
  epoch: number;
  bcLoss: number;
  heldOutHit: number;
  answersWithPoint: number;
  seconds: number;
  lastAnswer: string;
}

interface ProbeSummary {
  size: string;
  parameters: number;
  train: number;
  test: number;
  epochs: number;
  lr: number;
  minibatch: number;
  centreBaseline: number;
  curve: ProbePoint[];
}

/** dartflow's UI-TARS messages for a first step, with the instruction and the screenshot as placeholders. */
export function probeTemplate(): unknown[] {
  const marker = 'IMAGEMARKER';
  const messages = buildMessages(INSTRUCTION_SLOT, [{ pngBase64: marker }], DART_CONTEXT_LIMITS);
  return JSON.parse(JSON.stringify(messages).replace(`data:image/png;base64,${marker}`, IMAGE_SLOT)) as unknown[];
}

function runProbe(python: string, args: string[], log: (line: string) => void): Promise<ProbeSummary> {
  return new Promise((resolve, reject) => {
    const child = spawn(python, ['-m', 'dartflow_vlm.grounding_probe', ...args], {
      cwd: path.join(PROJECT_ROOT, 'python'),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let summary: ProbeSummary | undefined;
    let err = '';
    let pending = '';
    child.stdout.on('data', (d: Buffer) => {
      pending += d.toString();
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines.filter(Boolean)) {
        const parsed = JSON.parse(line) as ProbeSummary & { summary?: boolean };
        if (parsed.summary) summary = parsed;
        else log(line);
      }
    });
    child.stderr.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-4000)));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 && summary ? resolve(summary) : reject(new Error(`grounding probe failed (${code}): ${err}`))
    );
  });
}

export async function benchVlmGrounding(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      sizes: { type: 'string', default: 'tiny,small' },
      train: { type: 'string', default: '256' },
      epochs: { type: 'string', default: '12' },
      lr: { type: 'string', default: '2e-3' },
    },
  });
  const python = vlmPython();
  if (!python)
    throw new Error(`bench vlm-grounding needs the VLM environment at ${VLM_VENV}: run \`bash infra/install-vlm.sh\``);
  const settings = loadInfraSettings();
  const dir = benchOutDir();
  const templateFile = path.join(os.tmpdir(), `dartflow-grounding-prompt-${process.pid}.json`);
  fs.writeFileSync(templateFile, JSON.stringify(probeTemplate()));
  const sizes = (values.sizes ?? '').split(',').filter(Boolean);
  const results: ProbeSummary[] = [];
  try {
    for (const size of sizes) {
      console.log(`[bench vlm-grounding] ${size}: ${values.train} demos × ${values.epochs} epochs, lr ${values.lr}`);
      results.push(
        await runProbe(
          python,
          [
            '--prompt-json',
            templateFile,
            '--size',
            size,
            '--train',
            values.train ?? '256',
            '--epochs',
            values.epochs ?? '12',
            '--lr',
            values.lr ?? '2e-3',
          ],
          (line) => console.log(`  ${size} ${line}`)
        )
      );
    }
  } finally {
    fs.rmSync(templateFile, { force: true });
  }
  const out = {
    measuredAt: new Date().toISOString(),
    machine: `${os.cpus().length}-core x86-64, no GPU (shared with other work: see loadAverage)`,
    loadAverage: os.loadavg()[0],
    command: `npm run bench -- vlm-grounding ${args.join(' ')}`.trim(),
    simulated:
      'the screens: synthetic 168×168 click-target screens (one button of random size, colour, label, position) drawn by PIL, not the Chromium page',
    results,
  };
  fs.writeFileSync(path.join(dir, 'vlm-grounding.json'), JSON.stringify(out, null, 2));
  const baseline = results[0]?.centreBaseline ?? 0;
  await writeSvgAsPng(
    lineChartSvg(
      results.map((r) => ({
        name: `${r.size} (${(r.parameters / 1e6).toFixed(2)}M params)`,
        points: r.curve.map((p) => [p.epoch, p.heldOutHit] as [number, number]),
      })),
      {
        title: `Random-init Qwen2-VL: held-out clicks inside the button after BC on ${values.train} demos`,
        xLabel: 'behaviour-cloning epochs',
        yLabel: 'held-out hit rate (greedy)',
        yMin: 0,
        yMax: 1,
        hLines: [{ y: baseline, label: `always the centre: ${(baseline * 100).toFixed(0)}%` }],
      }
    ),
    path.join(dir, 'vlm-grounding.png'),
    settings.chromiumPath
  );
  for (const r of results)
    console.log(
      `[bench vlm-grounding] ${r.size}: held-out hit ${r.curve.map((p) => `${(p.heldOutHit * 100).toFixed(0)}%@${p.epoch}`).join(' ')} (centre baseline ${(r.centreBaseline * 100).toFixed(0)}%)`
    );
  console.log(`[bench vlm-grounding] wrote ${shownPath(path.join(dir, 'vlm-grounding.json'))} and vlm-grounding.png`);
}
