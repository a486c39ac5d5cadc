/**
 * The campaigns list: campaign workflows from Temporal visibility (state, policy version, success from
 * dartflow's search attributes, a link to each workflow in the Temporal UI), filterable with Temporal's
 * list query, plus campaigns that have data in MinIO but no workflow in this namespace.
 */
import { html, href, isoTime, pct } from '../html';
import type { ObjectStore } from '../../storage/object-store';
import { listStoredCampaigns } from '../store-reader';
import { listCampaigns, type CampaignRow, type TemporalSource } from '../temporal-reader';
import type { Page } from './layout';

function statusClass(row: CampaignRow): string {
  if (row.status === 'RUNNING') return 'ok';
  if (row.status === 'COMPLETED') return '';
  return 'bad';
}

export async function campaignsPage(store: ObjectStore, temporal: TemporalSource, query: string): Promise<Page> {
  let rows: CampaignRow[] = [];
  let more = false;
  let temporalError: string | undefined;
  let status = 200;
  try {
    ({ rows, more } = await listCampaigns(await temporal.get(), query));
  } catch (err) {
    const message = err instanceof Error ? err.message.split('\n')[0] : String(err);
    // A bad filter is the reader's mistake (400); anything else means Temporal is not there.
    temporalError = query ? `The filter was refused: ${message}` : `Temporal is unreachable: ${message}`;
    status = query ? 400 : 503;
  }
  const stored = await listStoredCampaigns(store).catch(() => [] as string[]);
  const inTemporal = new Set(rows.map((r) => r.campaignId));
  const onlyStored = stored.filter((id) => !inTemporal.has(id));

  const table = html`<table id="campaigns">
    <thead>
      <tr>
        <th>campaign</th>
        <th>workflow</th>
        <th>state</th>
        <th>policy version</th>
        <th>success</th>
        <th>started</th>
        <th>closed</th>
        <th>Temporal UI</th>
      </tr>
    </thead>
    <tbody>
      ${rows.map((r) => {
        const ui = temporal.workflowUrl(r.workflowId);
        return html`<tr data-campaign="${r.campaignId}">
          <td><a href="${href('campaigns', r.campaignId)}">${r.campaignId}</a></td>
          <td class="${statusClass(r)}">${r.status}</td>
          <td>${r.state ?? '—'}</td>
          <td class="num">${r.policyVersion ?? '—'}</td>
          <td class="num">${pct(r.successRate)}</td>
          <td>${isoTime(r.startTime.getTime())}</td>
          <td>${r.closeTime ? isoTime(r.closeTime.getTime()) : '—'}</td>
          <td>
            ${ui ? html`<a class="temporal-ui" href="${ui}" target="_blank" rel="noopener">${r.workflowId}</a>` : r.workflowId}
          </td>
        </tr>`;
      })}
    </tbody>
  </table>`;

  return {
    status,
    title: 'Campaigns',
    crumbs: [['campaigns', '/']],
    body: html`<h1>Campaigns <span class="muted">(namespace ${temporal.namespace})</span></h1>
      <form class="filter" method="get" action="/">
        <label
          >Filter (Temporal list query, e.g. <code>DartflowState = 'running'</code>):
          <input
            type="text"
            name="query"
            value="${query}"
            placeholder="DartflowState = 'running' AND DartflowSuccessRate > 0.5"
        /></label>
        <button type="submit">Filter</button>
      </form>
      ${temporalError ? html`<div class="error-box" id="error">${temporalError}</div>` : ''}
      ${rows.length === 0 && !temporalError ? html`<p class="muted" id="empty">No campaign workflows${query ? ' match this filter' : ' in this namespace'}.</p>` : table}
      ${more ? html`<p class="notice">Showing the newest ${rows.length}; narrow the filter to see others.</p>` : ''}
      ${
        onlyStored.length > 0
          ? html`<h2>Data in MinIO without a campaign workflow here</h2>
              <p class="muted">
                Bucket ${store.bucket}: campaigns from another namespace, or whose workflow history expired.
              </p>
              <ul id="stored-only">
                ${onlyStored.map((id) => html`<li><a href="${href('campaigns', id)}">${id}</a></li>`)}
              </ul>`
          : ''
      }`,
  };
}
