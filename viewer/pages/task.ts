/**
 * One task of a campaign, from its index partition (every trajectory of the task, one read): success
 * over time and per policy version, DART's dynamic rollout count n and step budget per group over time
 * (§4.6/§4.7: n and the budget the campaign chose, as the groups' sizes and max steps show them), the
 * task's experience-pool contents, and its newest trajectories.
 */
import { lineChartSvg, type Series } from '../../lib/charts';
import type { ObjectStore } from '../../storage/object-store';
import type { TrajectoryIndexEntry } from '../../storage/trajectory-index';
import { checkId, notFound } from '../errors';
import { html, href, isoTime, num, pct, raw, type Html } from '../html';
import { outcomeOf, readPool, readTask } from '../index-reader';
import { campaignHasData } from '../store-reader';
import type { Page } from './layout';
import { equalBuckets, mean, trajectoryTable, unreadableBox } from './rows';

const POINTS = 40;
const RECENT = 25;
const POOL_SHOWN = 50;

interface GroupRow {
  groupId: string;
  at: number;
  n: number;
  maxSteps: number;
  successes: number;
  meanSteps: number;
}

/** Rollout groups of the task: n = trajectories in the group, the step budget = their maxSteps. */
function groupsOf(entries: TrajectoryIndexEntry[]): GroupRow[] {
  const byGroup = new Map<string, TrajectoryIndexEntry[]>();
  for (const e of entries) if (e.source === 'rollout') byGroup.set(e.groupId, [...(byGroup.get(e.groupId) ?? []), e]);
  return [...byGroup.entries()]
    .map(([groupId, es]) => ({
      groupId,
      at: Math.min(...es.map((e) => e.createdAt)),
      n: es.length,
      maxSteps: Math.max(...es.map((e) => e.maxSteps)),
      successes: es.filter((e) => outcomeOf(e) === 'success').length,
      meanSteps: mean(es.map((e) => e.steps)),
    }))
    .sort((a, b) => a.at - b.at);
}

function charts(entries: TrajectoryIndexEntry[], groups: GroupRow[]): Html {
  const done = entries
    .filter((e) => e.status === 'ok' && e.source === 'rollout')
    .sort((a, b) => a.createdAt - b.createdAt);
  if (done.length === 0) return html`<p class="muted" id="no-rollouts">No completed rollout of this task yet.</p>`;
  const t0 = done[0]!.createdAt;
  const minutes = (ms: number) => (ms - t0) / 60_000;
  const successByTime: Series = {
    name: `success (${Math.ceil(done.length / Math.min(POINTS, done.length))} episodes per point)`,
    points: equalBuckets(done, POINTS).map((b): [number, number] => [
      minutes(mean(b.map((e) => e.createdAt))),
      b.filter((e) => outcomeOf(e) === 'success').length / b.length,
    ]),
  };
  const byVersion = new Map<number, { n: number; ok: number }>();
  for (const e of done) {
    const v = byVersion.get(e.maxVersion) ?? { n: 0, ok: 0 };
    v.n++;
    if (outcomeOf(e) === 'success') v.ok++;
    byVersion.set(e.maxVersion, v);
  }
  const versionSeries: Series = {
    name: 'success per policy version',
    points: [...byVersion.entries()].sort((a, b) => a[0] - b[0]).map(([v, c]): [number, number] => [v, c.ok / c.n]),
  };
  const gb = equalBuckets(groups, POINTS);
  const nSeries: Series = {
    name: 'rollouts per group (n)',
    points: gb.map((b): [number, number] => [minutes(mean(b.map((g) => g.at))), mean(b.map((g) => g.n))]),
  };
  const budget: Series[] = [
    {
      name: 'step budget (max steps)',
      points: gb.map((b): [number, number] => [minutes(mean(b.map((g) => g.at))), mean(b.map((g) => g.maxSteps))]),
    },
    {
      name: 'steps used (mean)',
      points: gb.map((b): [number, number] => [minutes(mean(b.map((g) => g.at))), mean(b.map((g) => g.meanSteps))]),
    },
  ];
  const size = { width: 560, height: 300 };
  return html`<div class="charts" id="task-charts">
    ${raw(lineChartSvg([successByTime], { ...size, title: 'Success over time (sampled rollouts)', xLabel: 'minutes since the first episode', yLabel: 'success', yMin: 0, yMax: 1 }))}
    ${raw(lineChartSvg([versionSeries], { ...size, title: 'Success per policy version', xLabel: 'policy version', yLabel: 'success', yMin: 0, yMax: 1 }))}
    ${groups.length > 0 ? raw(lineChartSvg([nSeries], { ...size, title: 'Dynamic rollout count n per group', xLabel: 'minutes since the first episode', yLabel: 'n', yMin: 0 })) : ''}
    ${groups.length > 0 ? raw(lineChartSvg(budget, { ...size, title: 'Step budget per group', xLabel: 'minutes since the first episode', yLabel: 'steps', yMin: 0 })) : ''}
  </div>`;
}

export async function taskPage(store: ObjectStore, rawCampaign: string, rawTask: string): Promise<Page> {
  const campaignId = checkId(rawCampaign, 'campaign');
  const taskId = checkId(rawTask, 'task');
  const [hasData, task, pool] = await Promise.all([
    campaignHasData(store, campaignId),
    readTask(store, campaignId, taskId),
    readPool(store, campaignId, { task: taskId, limit: POOL_SHOWN }),
  ]);
  if (!hasData) throw notFound('Unknown campaign', `No data under campaigns/${campaignId}/ in bucket ${store.bucket}.`);
  if (task.entries.length === 0 && task.unreadable.length === 0 && pool.rows.length === 0)
    throw notFound(
      'Unknown task',
      `Campaign ${campaignId} has no trajectory of task "${taskId}" in its index (campaigns/${campaignId}/index/trajectories/task=${taskId}/) and no pool entry for it.`
    );
  const entries = task.entries; // newest first
  const groups = groupsOf(entries);
  const ok = entries.filter((e) => e.status === 'ok');
  const successes = ok.filter((e) => outcomeOf(e) === 'success').length;
  const bySource = new Map<string, number>();
  for (const e of entries) bySource.set(e.source, (bySource.get(e.source) ?? 0) + 1);
  const lastGroup = groups.at(-1);
  const recentGroups = groups.slice(-10).reverse();
  const searchLink = `${href('campaigns', campaignId, 'search')}?task=${encodeURIComponent(taskId)}`;

  return {
    title: `Task ${taskId} · ${campaignId}`,
    crumbs: [
      ['campaigns', '/'],
      [campaignId, href('campaigns', campaignId)],
      [taskId, href('campaigns', campaignId, 'tasks', taskId)],
    ],
    body: html`<h1>Task ${taskId} <span class="muted">in campaign ${campaignId}</span></h1>
      ${unreadableBox('index objects of this task', task.unreadable)} ${unreadableBox('pool entries', pool.unreadable)}
      <dl class="kv" id="task-summary">
        <dt>trajectories</dt>
        <dd>${entries.length} (${[...bySource.entries()].map(([s, n]) => `${s} ${n}`).join(', ')})</dd>
        <dt>success (completed episodes)</dt>
        <dd id="task-success">${pct(ok.length ? successes / ok.length : NaN)} of ${ok.length}</dd>
        <dt>infrastructure failures</dt>
        <dd>${entries.length - ok.length}</dd>
        <dt>latest group</dt>
        <dd>
          ${lastGroup ? html`n = ${lastGroup.n}, step budget ${lastGroup.maxSteps} (${isoTime(lastGroup.at)})` : '—'}
        </dd>
        <dt>experience pool</dt>
        <dd>${pool.rows.length}${pool.next ? '+' : ''} pooled success${pool.rows.length === 1 ? '' : 'es'}</dd>
      </dl>
      <h2>Success, rollout count and step budget over time</h2>
      ${charts(entries, groups)}
      <h2>Newest groups</h2>
      ${
        recentGroups.length === 0
          ? html`<p class="muted">No rollout group.</p>`
          : html`<table id="groups">
              <thead>
                <tr>
                  <th>group</th>
                  <th>n</th>
                  <th>step budget</th>
                  <th>successes</th>
                  <th>mean steps</th>
                  <th>started</th>
                </tr>
              </thead>
              <tbody>
                ${recentGroups.map(
                  (g) =>
                    html`<tr data-group="${g.groupId}">
                      <td><a href="${href('campaigns', campaignId, 'groups', g.groupId)}">${g.groupId}</a></td>
                      <td class="num n">${g.n}</td>
                      <td class="num budget">${g.maxSteps}</td>
                      <td class="num">${g.successes}</td>
                      <td class="num">${num(g.meanSteps, 3)}</td>
                      <td>${isoTime(g.at)}</td>
                    </tr>`
                )}
              </tbody>
            </table>`
      }
      <h2>Experience pool</h2>
      ${
        pool.rows.length === 0
          ? html`<p class="muted" id="pool-empty">No pooled success for this task.</p>`
          : trajectoryTable(campaignId, pool.rows, 'pool')
      }
      <h2>Newest trajectories</h2>
      ${trajectoryTable(campaignId, entries.slice(0, RECENT))}
      <p><a id="search-task" href="${searchLink}">All ${entries.length} trajectories of this task (search) »</a></p>`,
  };
}
