/**
 * One campaign: its workflow (state, live status of a running one), the held-out success curve per
 * family (evals/), the train steps (ledger/), discard reasons (discards/) and a paged trajectory list.
 */
import { barChartSvg, lineChartSvg, type Series } from '../../lib/charts';
import type { EvalPoint } from '../../schemas/campaign';
import type { DiscardRecord } from '../../schemas/discards';
import type { LedgerEntry } from '../../schemas/records';
import type { ObjectStore } from '../../storage/object-store';
import { listPartitions, partitions, readPartition, type DiscardIndexEntry } from '../../storage/trajectory-index';
import { checkId, notFound, toViewerError } from '../errors';
import { readCheckpointPage, readLedgerPage, type NewestPage } from '../history-reader';
import { html, href, isoTime, num, pct, raw, type Html } from '../html';
import { searchTrajectories, type SearchResult } from '../index-reader';
import {
  campaignHasData,
  readDiscards,
  readEvals,
  readTrajectoryPage,
  RECORD_LIMIT,
  type Records,
} from '../store-reader';
import { describeCampaign, type CampaignExecution, type TemporalSource } from '../temporal-reader';
import type { Page } from './layout';
import { lineageSection } from './lineage';
import { trajectoryTable, unreadableBox } from './rows';

/** Train steps and checkpoint versions shown per page view (the newest; older ones by paging). */
export const STEPS_SHOWN = 25;
const VERSIONS_SHOWN = 25;
const DISCARD_POINTS = 30;

export const DEFAULT_PAGE_SIZE = 50;
const MAX_PAGE_SIZE = 500;

function unreadableNotice(what: string, r: Records<unknown>): Html | string {
  const parts: Html[] = [];
  if (r.omitted > 0)
    parts.push(
      html`<p class="notice">Showing the newest ${RECORD_LIMIT} ${what}; ${r.omitted} older ones are not read.</p>`
    );
  if (r.unreadable.length > 0)
    parts.push(
      html`<div class="error-box unreadable">
        <p>${r.unreadable.length} ${what} could not be read:</p>
        <ul>
          ${r.unreadable.map((u) => html`<li><code>${u.key}</code>: ${u.message}</li>`)}
        </ul>
      </div>`
    );
  return parts.length ? html`${parts}` : '';
}

function workflowSection(
  exec: CampaignExecution | null,
  temporalError: string | undefined,
  temporal: TemporalSource,
  campaignId: string
): Html {
  if (temporalError) return html`<div class="notice" id="temporal-error">Temporal: ${temporalError}</div>`;
  if (!exec)
    return html`<div class="notice" id="no-workflow">
      No workflow <code>campaign-${campaignId}</code> in namespace ${temporal.namespace}: showing what MinIO holds.
    </div>`;
  const ui = temporal.workflowUrl(exec.row.workflowId);
  const live = exec.live;
  return html`<dl class="kv" id="workflow">
      <dt>workflow</dt>
      <dd>
        ${ui ? html`<a class="temporal-ui" href="${ui}" target="_blank" rel="noopener">${exec.row.workflowId}</a>` : exec.row.workflowId}
        <span class="${exec.row.status === 'RUNNING' ? 'ok' : ''}" id="wf-status">${exec.row.status}</span>
      </dd>
      <dt>state</dt>
      <dd id="state">${live?.phase ?? exec.row.state ?? '—'}</dd>
      <dt>policy version</dt>
      <dd>${live?.policyVersion ?? exec.row.policyVersion ?? '—'}</dd>
      <dt>success (last evaluation)</dt>
      <dd>${pct(live?.lastEval?.successRate ?? exec.row.successRate)}</dd>
      ${
        live
          ? html`<dt>episodes / train steps</dt>
              <dd>${live.episodes} / ${live.trainSteps}</dd>
              <dt>in flight</dt>
              <dd>
                ${live.groupsInFlight} groups, ${live.episodesInFlight}
                episodes${live.trainInFlight ? ', a train step' : ''}
              </dd>
              <dt>recent success (train)</dt>
              <dd>${pct(live.recentSuccessRate)}</dd>`
          : ''
      }
      <dt>started</dt>
      <dd>${isoTime(exec.row.startTime.getTime())}</dd>
    </dl>
    ${exec.liveError ? html`<div class="notice" id="live-error">Live status unavailable: ${exec.liveError}</div>` : ''}`;
}

function evalCharts(evals: Records<EvalPoint>): Html {
  const points = [...evals.items].sort((a, b) => a.atMs - b.atMs);
  if (points.length === 0) return html`<p class="muted" id="no-evals">No held-out evaluation recorded yet.</p>`;
  const families = [...new Set(points.flatMap((p) => Object.keys(p.perFamily)))].sort();
  const series = (x: (p: (typeof points)[number]) => number): Series[] => [
    { name: 'all', points: points.map((p) => [x(p), p.successRate]), color: '#20232a' },
    ...families.map((f) => ({
      name: f,
      points: points.filter((p) => p.perFamily[f] !== undefined).map((p): [number, number] => [x(p), p.perFamily[f]!]),
    })),
  ];
  const opts = {
    yLabel: 'held-out success',
    yMin: 0,
    yMax: 1,
    width: 620,
    height: 320,
    hLines: [{ y: 0.9, label: '90 %' }],
  };
  return html`<div class="charts" id="eval-charts">
    ${raw(
      lineChartSvg(
        series((p) => p.atEpisodes),
        { ...opts, title: 'Held-out success vs episodes', xLabel: 'episodes' }
      )
    )}
    ${raw(
      lineChartSvg(
        series((p) => p.atMs / 60_000),
        { ...opts, title: 'Held-out success vs time', xLabel: 'minutes since start' }
      )
    )}
  </div>`;
}

/** The train-step columns: DART's per-step diagnostics, from the ledger entry and its metrics. */
function ledgerTable(ledger: NewestPage<LedgerEntry>): Html {
  if (ledger.items.length === 0) return html`<p class="muted" id="no-ledger">No train step committed yet.</p>`;
  const bad = ledger.items.flatMap((i) => (i.error ? [{ key: i.key, message: i.error }] : []));
  const rows = ledger.items.flatMap((i) => (i.value ? [i.value] : []));
  const m = (e: LedgerEntry, k: string) => num(e.metrics[k]);
  return html`${unreadableBox('ledger entries', bad)}
    <table id="ledger">
      <thead>
        <tr>
          <th>step</th>
          <th>version</th>
          <th>trajectories</th>
          <th>max staleness</th>
          <th>loss</th>
          <th>KL</th>
          <th>clip fraction</th>
          <th>entropy</th>
          <th>kept by entropy mask</th>
          <th>TIS weight mean / min</th>
          <th>TIS truncated</th>
          <th>skipped groups</th>
          <th>committed</th>
        </tr>
      </thead>
      <tbody>
        ${rows.map(
          (e) =>
            html`<tr data-step="${e.trainStep}">
              <td class="num">${e.trainStep}</td>
              <td>v${e.fromVersion} → v${e.toVersion}</td>
              <td class="num">${e.consumed.length}</td>
              <td class="num">${Math.max(...e.consumed.map((c) => c.staleness))}</td>
              <td class="num loss">${m(e, 'loss')}</td>
              <td class="num">${m(e, 'kl')}</td>
              <td class="num">${m(e, 'clipFraction')}</td>
              <td class="num">${m(e, 'entropyMean')}</td>
              <td class="num">${pct(e.metrics.selectedFraction)}</td>
              <td class="num">${num(e.isWeight.mean)} / ${num(e.isWeight.min)}</td>
              <td class="num">${pct(e.isWeight.truncatedFraction)}</td>
              <td class="num">${e.skipped?.length ?? 0}</td>
              <td>${isoTime(e.createdAt)}</td>
            </tr>`
        )}
      </tbody>
    </table>`;
}

/** Discard decisions as index entries; records are turned into the same shape for campaigns without the index. */
function discardEntriesOfRecords(records: Records<DiscardRecord>): DiscardIndexEntry[] {
  return records.items.flatMap((r) => {
    const counts = new Map<string, number>();
    for (const t of r.trajectories) counts.set(t.reason, (counts.get(t.reason) ?? 0) + 1);
    return [...counts].map(([reason, n]) => ({
      id: `${r.groupId}-${r.event}-${reason}`,
      groupId: r.groupId,
      taskId: r.taskId,
      event: r.event,
      reason,
      trajectories: n,
      trainStep: r.trainStep,
      policyVersion: r.policyVersion,
      createdAt: r.createdAt,
      indexedAt: r.createdAt,
    }));
  });
}

function discardSection(entries: DiscardIndexEntry[]): Html {
  const byReason = new Map<string, number>();
  for (const e of entries) byReason.set(e.reason, (byReason.get(e.reason) ?? 0) + e.trajectories);
  if (byReason.size === 0) return html`<p class="muted" id="no-discards">No trajectory discarded.</p>`;
  const bars = [...byReason.entries()].sort((a, b) => b[1] - a[1]);
  // Over time: trajectories discarded per reason in equal time slices from the first decision to the last.
  const sorted = [...entries].sort((a, b) => a.createdAt - b.createdAt);
  const t0 = sorted[0]!.createdAt;
  const span = Math.max(1, sorted.at(-1)!.createdAt - t0);
  const slices = Math.min(DISCARD_POINTS, Math.max(2, sorted.length));
  const slice = (t: number) => Math.min(slices - 1, Math.floor(((t - t0) / span) * slices));
  const series: Series[] = bars.map(([reason]) => {
    const counts = new Array<number>(slices).fill(0);
    for (const e of sorted) if (e.reason === reason) counts[slice(e.createdAt)]! += e.trajectories;
    return { name: reason, points: counts.map((c, i): [number, number] => [((i + 0.5) * span) / slices / 60_000, c]) };
  });
  return html`<div class="charts">
    <table id="discards">
      <thead>
        <tr>
          <th>reason</th>
          <th>trajectories</th>
        </tr>
      </thead>
      <tbody>
        ${bars.map(
          ([reason, n]) =>
            html`<tr data-reason="${reason}">
              <td>${reason}</td>
              <td class="num">${n}</td>
            </tr>`
        )}
      </tbody>
    </table>
    ${raw(
      barChartSvg(
        bars.map(([label, value]) => ({ label, value })),
        { title: 'Discarded trajectories by reason', yLabel: 'trajectories', width: 520, height: 280 }
      )
    )}
    <div id="discards-over-time">
      ${raw(
        lineChartSvg(series, {
          title: 'Discard reasons over time',
          xLabel: 'minutes since the first discard',
          yLabel: `trajectories per ${Math.max(1, Math.round(span / slices / 1000))} s`,
          yMin: 0,
          width: 620,
          height: 300,
        })
      )}
    </div>
  </div>`;
}

export interface CampaignQuery {
  /** Id-ordered listing (campaigns without an index): the last id shown. */
  after?: string;
  /** Index order (newest first): the cursor of the last row shown. */
  before?: string;
  limit?: number;
  /** Train steps at or below this number (ledger paging). */
  stepsAtOrBelow?: number;
}

/** The campaign's discard decisions from the index; from the records (newest RECORD_LIMIT) when it has none. */
async function readDiscardEntries(
  store: ObjectStore,
  campaignId: string
): Promise<{ entries: DiscardIndexEntry[]; unreadable: Array<{ key: string; message: string }>; notice?: Html }> {
  const indexed = await readPartition(store, campaignId, 'discards', partitions.all).catch((err: unknown) => {
    throw toViewerError(err, 'discard index');
  });
  if (indexed.objects > 0) return { entries: indexed.entries, unreadable: indexed.unreadable };
  const records = await readDiscards(store, campaignId);
  if (records.items.length === 0 && records.unreadable.length === 0) return { entries: [], unreadable: [] };
  return {
    entries: discardEntriesOfRecords(records),
    unreadable: records.unreadable,
    notice: html`<p class="notice" id="discards-from-records">
      No discard index (records written before it existed): read the discard records
      directly${records.omitted ? html`, the newest ${RECORD_LIMIT} of ${records.omitted + RECORD_LIMIT}` : ''}.
    </p>`,
  };
}

function trajectoriesSection(
  campaignId: string,
  indexed: SearchResult,
  listed: Awaited<ReturnType<typeof readTrajectoryPage>> | null,
  q: { before?: string; after?: string; limit: number }
): Html {
  const link = (params: Record<string, string>) =>
    `${href('campaigns', campaignId)}?${new URLSearchParams({ ...params, limit: String(q.limit) }).toString()}#trajectories`;
  if (listed) {
    // No index: the campaign's trajectories by id, one delimiter listing per page (and a manifest per row).
    return html`<p class="notice" id="no-index">
        No trajectory index for this campaign (stored before the index existed): listed by id, without search.
      </p>
      <table id="trajectories">
        <thead>
          <tr>
            <th>trajectory</th>
            <th>group</th>
            <th>task</th>
            <th>status</th>
            <th>reward</th>
            <th>steps</th>
            <th>policy versions</th>
            <th>source</th>
            <th>created</th>
          </tr>
        </thead>
        <tbody>
          ${listed.rows.map((r) => {
            const m = r.manifest;
            const a = html`<a href="${href('campaigns', campaignId, 'trajectories', r.trajectoryId)}"
              >${r.trajectoryId}</a
            >`;
            if (!m)
              return html`<tr class="broken">
                <td>${a}</td>
                <td colspan="8" class="bad">${r.error ?? 'unreadable'}</td>
              </tr>`;
            return html`<tr>
              <td>${a}</td>
              <td><a href="${href('campaigns', campaignId, 'groups', m.groupId)}">${m.groupId}</a></td>
              <td>${m.taskId}</td>
              <td class="${m.status === 'ok' ? '' : 'bad'}">${m.status}</td>
              <td class="num">${num(m.reward)}</td>
              <td class="num">${m.numSteps} / ${m.maxSteps}</td>
              <td>
                v${m.minPolicyVersion}${m.maxPolicyVersion !== m.minPolicyVersion ? `–v${m.maxPolicyVersion}` : ''}
              </td>
              <td>${m.source}</td>
              <td>${isoTime(m.createdAt)}</td>
            </tr>`;
          })}
        </tbody>
      </table>
      <div class="pager">
        ${q.after ? html`<a id="first-page" href="${link({})}">« first page</a>` : ''}
        ${listed.next ? html`<a id="next-page" href="${link({ after: listed.next })}">next ${q.limit} »</a>` : html`<span class="muted">last page</span>`}
      </div>`;
  }
  return html`${unreadableBox('trajectory index objects', indexed.unreadable)}
    ${indexed.rows.length === 0 ? html`<p class="muted" id="no-trajectories">No trajectory${q.before ? ' older than this' : ''}.</p>` : trajectoryTable(campaignId, indexed.rows)}
    <div class="pager">
      ${q.before ? html`<a id="first-page" href="${link({})}">« newest</a>` : ''}
      ${indexed.next ? html`<a id="next-page" href="${link({ before: indexed.next })}">next ${q.limit} »</a>` : html`<span class="muted">last page</span>`}
    </div>`;
}

export async function campaignPage(
  store: ObjectStore,
  temporal: TemporalSource,
  rawId: string,
  q: CampaignQuery
): Promise<Page> {
  const campaignId = checkId(rawId, 'campaign');
  const limit = Math.min(MAX_PAGE_SIZE, Math.max(1, q.limit ?? DEFAULT_PAGE_SIZE));
  const after = q.after ? checkId(q.after, 'trajectory') : undefined;

  // Temporal and MinIO answer independently (and a running campaign's status query may take seconds):
  // ask both at once; the campaign is shown when either knows it.
  const workflow = describeCampaign(temporal, campaignId).then(
    (exec): { exec: CampaignExecution | null; error?: string } => ({ exec }),
    (err: unknown) => ({ exec: null, error: err instanceof Error ? err.message.split('\n')[0] : String(err) })
  );
  const records = Promise.all([
    readEvals(store, campaignId),
    readLedgerPage(store, campaignId, { atOrBelow: q.stepsAtOrBelow, limit: STEPS_SHOWN }),
    readDiscardEntries(store, campaignId),
    readCheckpointPage(store, campaignId, { limit: VERSIONS_SHOWN }),
    listPartitions(store, campaignId, 'trajectories', 'task'),
    searchTrajectories(store, campaignId, {}, { before: q.before, limit }).then(async (indexed) => ({
      indexed,
      // Campaigns stored before the index: fall back to the id-ordered listing.
      listed: indexed.noIndex ? await readTrajectoryPage(store, campaignId, { after, limit }) : null,
    })),
  ]);
  records.catch(() => undefined); // awaited below; this only keeps an early rejection from going unhandled
  const [hasData, { exec, error: temporalError }] = await Promise.all([campaignHasData(store, campaignId), workflow]);
  if (!hasData && !exec)
    throw notFound(
      'Unknown campaign',
      `No campaign "${campaignId}": no workflow campaign-${campaignId} in namespace ${temporal.namespace} and no data under campaigns/${campaignId}/ in bucket ${store.bucket}.`
    );
  const [evals, ledger, discards, checkpoints, tasks, { indexed, listed }] = await records;
  const head = exec?.live?.policyVersion ?? exec?.row.policyVersion;
  const lowestShown = ledger.items.at(-1)?.number;
  const stepsLink = (atOrBelow?: number) =>
    `${href('campaigns', campaignId)}?${new URLSearchParams(atOrBelow !== undefined ? { steps: String(atOrBelow) } : {}).toString()}#ledger`;

  return {
    title: `Campaign ${campaignId}`,
    crumbs: [
      ['campaigns', '/'],
      [campaignId, href('campaigns', campaignId)],
    ],
    body: html`<h1>Campaign ${campaignId}</h1>
      ${workflowSection(exec, temporalError, temporal, campaignId)}
      <p>
        <a id="search-link" href="${href('campaigns', campaignId, 'search')}">Search trajectories</a> by task, outcome,
        policy version and source.
      </p>
      <h2>Held-out success per family</h2>
      ${unreadableNotice('evaluation points', evals)} ${evalCharts(evals)}
      <h2>Tasks</h2>
      ${
        tasks.length === 0
          ? html`<p class="muted" id="no-tasks">No task in the trajectory index.</p>`
          : html`<p id="tasks">
              ${tasks.map((t) => {
                const id = t.replace(/^task=/, '');
                return html`<a class="task-link" href="${href('campaigns', campaignId, 'tasks', id)}">${id}</a> `;
              })}
            </p>`
      }
      <h2>Train steps</h2>
      ${ledgerTable(ledger)}
      <div class="pager">
        ${q.stepsAtOrBelow !== undefined ? html`<a id="steps-newest" href="${stepsLink()}">« newest steps</a>` : ''}
        ${
          lowestShown !== undefined && lowestShown > 0 && ledger.items.length >= STEPS_SHOWN
            ? html`<a id="steps-older" href="${stepsLink(lowestShown - 1)}">older steps »</a>`
            : ''
        }
      </div>
      <h2>Version lineage</h2>
      ${lineageSection(checkpoints, head, exec?.live)}
      <h2>Discard reasons</h2>
      ${discards.notice ?? ''} ${unreadableBox('discard index objects or records', discards.unreadable)}
      ${discardSection(discards.entries)}
      <h2>Trajectories</h2>
      ${trajectoriesSection(campaignId, indexed, listed, { before: q.before, after, limit })}`,
  };
}
