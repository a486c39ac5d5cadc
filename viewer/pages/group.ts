/**
 * A GRPO group: its n trajectories (`<groupId>-e<i>`) side by side, one column each, steps aligned by
 * row, so where the successful and failed episodes diverge is visible at a glance.
 */
import type { StepRecord, TrajectoryManifest } from '../../schemas/records';
import type { ObjectStore } from '../../storage/object-store';
import { checkId, notFound, toViewerError } from '../errors';
import { html, href, num } from '../html';
import { actionCaption } from '../overlay';
import { groupTrajectoryIds, readManifest, readSteps } from '../store-reader';
import type { Page } from './layout';
import { stepShot } from './shot';

interface Column {
  trajectoryId: string;
  manifest?: TrajectoryManifest;
  steps: StepRecord[];
  error?: string;
}

export async function groupPage(store: ObjectStore, rawCampaign: string, rawGroup: string): Promise<Page> {
  const campaignId = checkId(rawCampaign, 'campaign');
  const groupId = checkId(rawGroup, 'group');
  const ids = await groupTrajectoryIds(store, campaignId, groupId);
  if (ids.length === 0)
    throw notFound(
      'Unknown group',
      `No trajectory ${groupId}-e<i> under campaigns/${campaignId}/trajectories/ in bucket ${store.bucket}.`
    );
  const columns = await Promise.all(
    ids.map(async (trajectoryId): Promise<Column> => {
      try {
        const manifest = await readManifest(store, campaignId, trajectoryId);
        return { trajectoryId, manifest, steps: await readSteps(store, manifest) };
      } catch (err) {
        return { trajectoryId, steps: [], error: toViewerError(err).detail };
      }
    })
  );
  const task = columns.find((c) => c.manifest)?.manifest;
  const successes = columns.filter((c) => (c.manifest?.reward ?? 0) >= 1).length;
  return {
    title: `Group ${groupId}`,
    crumbs: [
      ['campaigns', '/'],
      [campaignId, href('campaigns', campaignId)],
      [`group ${groupId}`, ''],
    ],
    body: html`<h1>Group ${groupId}</h1>
      <p>${task ? html`Task <b>${task.taskId}</b>, seed ${task.seed}: ${task.instruction}` : ''}</p>
      <p id="group-summary">${columns.length} trajectories, ${successes} successful.</p>
      <div class="group" id="group" style="grid-template-columns: repeat(${columns.length}, minmax(180px, 260px))">
        ${columns.map(
          (c) =>
            html`<div class="col" data-trajectory="${c.trajectoryId}">
              <div>
                <a href="${href('campaigns', campaignId, 'trajectories', c.trajectoryId)}"><b>${c.trajectoryId}</b></a>
              </div>
              ${
                c.manifest
                  ? html`<div>
                      reward
                      <span class="${(c.manifest.reward ?? 0) >= 1 ? 'ok' : 'bad'}">${num(c.manifest.reward)}</span> ·
                      ${c.manifest.status} · ${c.manifest.numSteps} steps
                    </div>`
                  : html`<div class="bad">${c.error}</div>`
              }
              ${c.steps.map(
                (s) =>
                  html`<div class="cell" data-step="${s.step}">
                    ${stepShot(s, 240)}
                    <div class="caption">${s.step}: ${actionCaption(s.action)}</div>
                    <div class="muted">
                      entropy ${num(s.entropy, 3)} · log-prob ${num(s.behaviourLogProb, 3)} · v${s.policyVersion}
                    </div>
                  </div>`
              )}
            </div>`
        )}
      </div>`,
  };
}
