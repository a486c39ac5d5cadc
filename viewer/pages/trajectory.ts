/**
 * One trajectory: its manifest, the discard reason when a discard record names it, the train step(s) that
 * consumed it, and every step with the screenshot, the action drawn on it, the model's text, what the
 * policy said (entropy, behaviour log-probability, version) and what training did with it (advantage,
 * selected by the entropy mask, truncated importance weight; from the step's per-sample record). ← and →
 * step through (j and k too); the URL's #step-N survives a reload.
 */
import type { ObjectStore } from '../../storage/object-store';
import { checkId } from '../errors';
import { html, href, isoTime, num } from '../html';
import { actionCaption } from '../overlay';
import {
  discardsOf,
  readManifest,
  readSteps,
  trainingOf,
  type Consumption,
  type TrainingOfTrajectory,
} from '../store-reader';
import type { Page } from './layout';
import { stepShot } from './shot';

/** Keyboard stepping: moves the highlighted step and scrolls it into view (no framework, ~20 lines). */
export const STEP_SCRIPT = `
(() => {
  const steps = [...document.querySelectorAll('.step')];
  if (steps.length === 0) return;
  let current = Math.max(0, steps.findIndex((s) => '#' + s.id === location.hash));
  const show = (i) => {
    steps[current].classList.remove('current');
    current = Math.min(steps.length - 1, Math.max(0, i));
    steps[current].classList.add('current');
    steps[current].scrollIntoView({ block: 'nearest' });
    history.replaceState(null, '', '#' + steps[current].id);
    document.body.dataset.currentStep = String(current);
  };
  show(current);
  document.addEventListener('keydown', (e) => {
    if (e.target instanceof HTMLInputElement) return;
    if (e.key === 'ArrowRight' || e.key === 'j') { show(current + 1); e.preventDefault(); }
    if (e.key === 'ArrowLeft' || e.key === 'k') { show(current - 1); e.preventDefault(); }
  });
})();
`;

/** The manifest's "trained" row: the consuming train steps, or where they were looked for. */
function trainedSummary(campaignId: string, t: TrainingOfTrajectory) {
  const problems = t.unreadable.map((u) => html`<div class="bad">${u.key}: ${u.message}</div>`);
  if (t.consumers.length === 0)
    return html`<span class="muted"
        >not consumed by a train step
        ${
          t.searched.to >= t.searched.from
            ? `writing v${t.searched.from} – v${t.searched.to}`
            : `(no checkpoint after v${t.searched.from - 1} yet)`
        }</span
      >${problems}`;
  return html`${t.consumers.map(
    (c) =>
      html`<div class="consumer" data-train-step="${c.entry.trainStep}">
        <a href="${href('campaigns', campaignId)}#ledger">train step ${c.entry.trainStep}</a>
        (v${c.entry.fromVersion} → v${c.entry.toVersion}${c.injectedFromPool ? ', from the experience pool' : ''},
        ${isoTime(c.entry.createdAt)})
        ${
          c.samplesError
            ? html`<span class="bad">per-sample record unreadable: ${c.samplesError}</span>`
            : c.entry.samples
              ? ''
              : html`<span class="muted">(its ledger entry names no per-sample record)</span>`
        }
      </div>`
  )}${problems}`;
}

/** What one train step did with one step of the trajectory. */
function stepTraining(c: Consumption, step: number) {
  const row = c.samples.get(step);
  const head = html`<dt>train step</dt>
    <dd class="consumed-by">${c.entry.trainStep}</dd>`;
  if (!c.entry.samples || c.samplesError) return head;
  if (!row)
    return html`${head}
      <dt>in the batch</dt>
      <dd class="muted not-in-batch">no (stale version, or an action the policy cannot express)</dd>`;
  return html`${head}
    <dt>advantage</dt>
    <dd class="advantage">${num(row.advantage)}</dd>
    <dt>selected for training</dt>
    <dd class="selected ${row.selected ? 'ok' : 'muted'}">${row.selected ? 'yes' : 'no (low entropy)'}</dd>
    <dt>importance weight</dt>
    <dd class="is-weight">${num(row.isWeight)}</dd>
    <dt>entropy (π_old)</dt>
    <dd class="train-entropy">${num(row.entropy)}</dd>
    <dt>staleness</dt>
    <dd>${row.staleness}</dd>`;
}

export async function trajectoryPage(store: ObjectStore, rawCampaign: string, rawTrajectory: string): Promise<Page> {
  const campaignId = checkId(rawCampaign, 'campaign');
  const trajectoryId = checkId(rawTrajectory, 'trajectory');
  const crumbs: Array<[string, string]> = [
    ['campaigns', '/'],
    [campaignId, href('campaigns', campaignId)],
  ];
  const manifest = await readManifest(store, campaignId, trajectoryId);
  const [steps, discards, training] = await Promise.all([
    readSteps(store, manifest),
    discardsOf(store, campaignId, manifest.groupId, trajectoryId),
    trainingOf(store, campaignId, manifest),
  ]);
  return {
    title: `Trajectory ${trajectoryId}`,
    crumbs: [
      ...crumbs,
      [`group ${manifest.groupId}`, href('campaigns', campaignId, 'groups', manifest.groupId)],
      [trajectoryId, ''],
    ],
    script: STEP_SCRIPT,
    body: html`<h1>Trajectory ${trajectoryId}</h1>
      <dl class="kv" id="manifest">
        <dt>task</dt>
        <dd>${manifest.taskId} (seed ${manifest.seed})</dd>
        <dt>instruction</dt>
        <dd id="instruction">${manifest.instruction}</dd>
        <dt>group</dt>
        <dd><a href="${href('campaigns', campaignId, 'groups', manifest.groupId)}">${manifest.groupId}</a></dd>
        <dt>status</dt>
        <dd class="${manifest.status === 'ok' ? '' : 'bad'}">
          ${manifest.status}${manifest.error ? `: ${manifest.error}` : ''}
        </dd>
        <dt>reward</dt>
        <dd id="reward" class="${manifest.reward === null ? '' : manifest.reward >= 1 ? 'ok' : 'bad'}">
          ${num(manifest.reward)}
        </dd>
        <dt>steps</dt>
        <dd>${manifest.numSteps} of at most ${manifest.maxSteps}</dd>
        <dt>policy versions</dt>
        <dd>v${manifest.minPolicyVersion} – v${manifest.maxPolicyVersion}</dd>
        <dt>source / env</dt>
        <dd>${manifest.source} / ${manifest.envKind}</dd>
        <dt>created</dt>
        <dd>${isoTime(manifest.createdAt)}</dd>
        <dt>discarded</dt>
        <dd id="discard">
          ${
            discards.length === 0
              ? html`<span class="muted">no discard record names it</span>`
              : discards.map(
                  (d) =>
                    html`<div class="bad discard-reason">
                      ${d.reason}
                      <span class="muted"
                        >(${d.record.event} at train step ${d.record.trainStep}, policy v${d.record.policyVersion},
                        ${isoTime(d.record.createdAt)})</span
                      >
                    </div>`
                )
          }
        </dd>
        <dt>trained</dt>
        <dd id="trained">${trainedSummary(campaignId, training)}</dd>
      </dl>
      <p class="muted">← / → (or k / j) step through; ${steps.length} steps.</p>
      ${steps.length !== manifest.numSteps ? html`<div class="notice">The manifest says ${manifest.numSteps} steps but steps.jsonl holds ${steps.length}.</div>` : ''}
      <div class="steps" id="steps">
        ${steps.map(
          (s) =>
            html`<section class="step" id="step-${s.step}" data-step="${s.step}">
              ${stepShot(s, 320)}
              <div class="info">
                <div>
                  <b>step ${s.step}</b> ·
                  <span class="caption" data-action-type="${s.action?.type ?? 'none'}">${actionCaption(s.action)}</span>
                  ${s.actionOk ? '' : html`<span class="bad">action failed</span>`}
                </div>
                <pre class="action-text">${s.actionText}</pre>
                ${s.parseError ? html`<div class="bad">parse error: ${s.parseError}</div>` : ''}
                <dl class="kv">
                  <dt>entropy</dt>
                  <dd>${num(s.entropy)}</dd>
                  <dt>behaviour log-prob</dt>
                  <dd>${num(s.behaviourLogProb)}</dd>
                  <dt>policy version</dt>
                  <dd>v${s.policyVersion}${s.policyServer ? ` on ${s.policyServer}` : ''}</dd>
                  <dt>duration</dt>
                  <dd>${num(s.endedAt - s.startedAt)} ms</dd>
                  ${
                    s.step === steps.length - 1
                      ? html`<dt>trajectory reward</dt>
                          <dd>${num(manifest.reward)}</dd>`
                      : ''
                  }
                </dl>
                ${training.consumers.map(
                  (c) =>
                    html`<dl class="kv training" data-train-step="${c.entry.trainStep}">${stepTraining(c, s.step)}</dl>`
                )}
              </div>
            </section>`
        )}
      </div>`,
  };
}
