/**
 * One trajectory: its manifest, the discard reason when a discard record names it, and every step with
 * the screenshot, the action drawn on it, the model's text and what the policy said (entropy, behaviour
 * log-probability, version). ← and → step through (j and k too); the URL's #step-N survives a reload.
 */
import type { ObjectStore } from '../../storage/object-store';
import { checkId } from '../errors';
import { html, href, isoTime, num } from '../html';
import { actionCaption } from '../overlay';
import { discardsOf, readManifest, readSteps } from '../store-reader';
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

export async function trajectoryPage(store: ObjectStore, rawCampaign: string, rawTrajectory: string): Promise<Page> {
  const campaignId = checkId(rawCampaign, 'campaign');
  const trajectoryId = checkId(rawTrajectory, 'trajectory');
  const crumbs: Array<[string, string]> = [
    ['campaigns', '/'],
    [campaignId, href('campaigns', campaignId)],
  ];
  const manifest = await readManifest(store, campaignId, trajectoryId);
  const [steps, discards] = await Promise.all([
    readSteps(store, manifest),
    discardsOf(store, campaignId, manifest.groupId, trajectoryId),
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
              </div>
            </section>`
        )}
      </div>`,
  };
}
