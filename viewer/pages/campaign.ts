/**
 * One campaign: its workflow (state, live status of a running one), the held-out success curve per
 * family (evals/), the train steps (ledger/), discard reasons (discards/) and a paged trajectory list.
 */
import { barChartSvg, lineChartSvg, type Series } from '../../lib/charts';
import type { EvalPoint } from '../../schemas/campaign';
import type { DiscardRecord } from '../../schemas/discards';
import type { LedgerEntry } from '../../schemas/records';
import type { ObjectStore } from '../../storage/object-store';
import { checkId, notFound } from '../errors';
import { html, href, isoTime, num, pct, raw, type Html } from '../html';
import {
  campaignHasData,
  readDiscards,
  readEvals,
  readLedger,
  readTrajectoryPage,
  RECORD_LIMIT,
  type Records,
} from '../store-reader';
import { describeCampaign, type CampaignExecution, type TemporalSource } from '../temporal-reader';
import type { Page } from './layout';

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
function ledgerTable(ledger: Records<LedgerEntry>): Html {
  if (ledger.items.length === 0) return html`<p class="muted" id="no-ledger">No train step committed yet.</p>`;
  const rows = [...ledger.items].sort((a, b) => b.trainStep - a.trainStep);
  const m = (e: LedgerEntry, k: string) => num(e.metrics[k]);
  return html`<table id="ledger">
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

function discardSection(discards: Records<DiscardRecord>): Html {
  const byReason = new Map<string, number>();
  for (const r of discards.items)
    for (const t of r.trajectories) byReason.set(t.reason, (byReason.get(t.reason) ?? 0) + 1);
  if (byReason.size === 0) return html`<p class="muted" id="no-discards">No trajectory discarded.</p>`;
  const bars = [...byReason.entries()].sort((a, b) => b[1] - a[1]);
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
  </div>`;
}

export interface CampaignQuery {
  after?: string;
  limit?: number;
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
    readLedger(store, campaignId),
    readDiscards(store, campaignId),
    readTrajectoryPage(store, campaignId, { after, limit }),
  ]);
  records.catch(() => undefined); // awaited below; this only keeps an early rejection from going unhandled
  const [hasData, { exec, error: temporalError }] = await Promise.all([campaignHasData(store, campaignId), workflow]);
  if (!hasData && !exec)
    throw notFound(
      'Unknown campaign',
      `No campaign "${campaignId}": no workflow campaign-${campaignId} in namespace ${temporal.namespace} and no data under campaigns/${campaignId}/ in bucket ${store.bucket}.`
    );
  const [evals, ledger, discards, page] = await records;

  const pageLink = (cursor?: string) =>
    `${href('campaigns', campaignId)}?${new URLSearchParams({ ...(cursor ? { after: cursor } : {}), limit: String(limit) }).toString()}`;

  return {
    title: `Campaign ${campaignId}`,
    crumbs: [
      ['campaigns', '/'],
      [campaignId, href('campaigns', campaignId)],
    ],
    body: html`<h1>Campaign ${campaignId}</h1>
      ${workflowSection(exec, temporalError, temporal, campaignId)}
      <h2>Held-out success per family</h2>
      ${unreadableNotice('evaluation points', evals)} ${evalCharts(evals)}
      <h2>Train steps</h2>
      ${unreadableNotice('ledger entries', ledger)} ${ledgerTable(ledger)}
      <h2>Discard reasons</h2>
      ${unreadableNotice('discard records', discards)} ${discardSection(discards)}
      <h2>Trajectories</h2>
      ${page.rows.length === 0 ? html`<p class="muted" id="no-trajectories">No trajectory${after ? ' after this one' : ''}.</p>` : ''}
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
          ${page.rows.map((r) => {
            const m = r.manifest;
            const link = html`<a href="${href('campaigns', campaignId, 'trajectories', r.trajectoryId)}"
              >${r.trajectoryId}</a
            >`;
            if (!m)
              return html`<tr class="broken">
                <td>${link}</td>
                <td colspan="8" class="bad">${r.error ?? 'unreadable'}</td>
              </tr>`;
            return html`<tr>
              <td>${link}</td>
              <td><a href="${href('campaigns', campaignId, 'groups', m.groupId)}">${m.groupId}</a></td>
              <td>${m.taskId}</td>
              <td class="${m.status === 'ok' ? '' : 'bad'}">${m.status}</td>
              <td class="num ${m.reward === null ? '' : m.reward >= 1 ? 'ok' : 'bad'}">${num(m.reward)}</td>
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
        ${after ? html`<a id="first-page" href="${pageLink()}">« first page</a>` : ''}
        ${page.next ? html`<a id="next-page" href="${pageLink(page.next)}">next ${limit} »</a>` : html`<span class="muted">last page</span>`}
      </div>`,
  };
}
