/**
 * Search a campaign's trajectories by task, outcome, policy version and source (rollout, precollect,
 * demo, or what the experience pool holds), newest first, paged with a cursor; answered from the index.
 */
import type { ObjectStore } from '../../storage/object-store';
import { listPartitions } from '../../storage/trajectory-index';
import { checkId, notFound, ViewerError } from '../errors';
import { html, href } from '../html';
import { OUTCOMES, SCAN_BUDGET, searchTrajectories, SOURCES, type SearchFilter } from '../index-reader';
import { campaignHasData } from '../store-reader';
import type { Page } from './layout';
import { trajectoryTable, unreadableBox } from './rows';

export const SEARCH_PAGE_SIZE = 50;
const MAX_PAGE_SIZE = 500;

function oneOf<T extends string>(value: string | null, allowed: readonly T[], what: string): T | undefined {
  if (value === null || value === '') return undefined;
  if ((allowed as readonly string[]).includes(value)) return value as T;
  throw new ViewerError(400, 'Bad search', `${what} "${value}" is not one of: ${allowed.join(', ')}.`);
}

export function parseFilter(q: URLSearchParams): SearchFilter {
  const task = q.get('task') || undefined;
  const version = q.get('version');
  if (version && !/^\d{1,6}$/.test(version))
    throw new ViewerError(400, 'Bad search', `version "${version}" is not a policy version number.`);
  return {
    ...(task ? { task: checkId(task, 'task') } : {}),
    ...(version ? { version: Number(version) } : {}),
    outcome: oneOf(q.get('outcome'), OUTCOMES, 'outcome'),
    source: oneOf(q.get('source'), SOURCES, 'source'),
  };
}

export async function searchPage(store: ObjectStore, rawCampaign: string, q: URLSearchParams): Promise<Page> {
  const campaignId = checkId(rawCampaign, 'campaign');
  const filter = parseFilter(q);
  const limitParam = Number(q.get('limit') ?? '');
  const limit = Number.isInteger(limitParam) && limitParam > 0 ? Math.min(MAX_PAGE_SIZE, limitParam) : SEARCH_PAGE_SIZE;
  const before = q.get('before') || undefined;
  const [hasData, tasks, result] = await Promise.all([
    campaignHasData(store, campaignId),
    listPartitions(store, campaignId, 'trajectories', 'task').catch(() => [] as string[]),
    searchTrajectories(store, campaignId, filter, { before, limit }),
  ]);
  if (!hasData) throw notFound('Unknown campaign', `No data under campaigns/${campaignId}/ in bucket ${store.bucket}.`);

  const params = (extra: Record<string, string>) => {
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries({ ...filter, limit: String(limit), ...extra }))
      if (v !== undefined && v !== '') p.set(k, String(v));
    return `${href('campaigns', campaignId, 'search')}?${p.toString()}`;
  };
  const select = (name: string, values: readonly string[], current: string | undefined) =>
    html`<select name="${name}" id="f-${name}">
      <option value="">any</option>
      ${values.map((v) => html`<option value="${v}" ${v === current ? 'selected' : ''}>${v}</option>`)}
    </select>`;
  const taskNames = tasks.map((t) => t.replace(/^task=/, ''));

  return {
    title: `Search · ${campaignId}`,
    crumbs: [
      ['campaigns', '/'],
      [campaignId, href('campaigns', campaignId)],
      ['search', href('campaigns', campaignId, 'search')],
    ],
    body: html`<h1>Trajectories of ${campaignId}</h1>
      <form class="filter" id="search-form" method="get" action="${href('campaigns', campaignId, 'search')}">
        <label>task ${select('task', taskNames, filter.task)}</label>
        <label>outcome ${select('outcome', OUTCOMES, filter.outcome)}</label>
        <label
          >policy version
          <input type="number" min="0" name="version" id="f-version" value="${filter.version ?? ''}" style="width:6em"
        /></label>
        <label>source ${select('source', SOURCES, filter.source)}</label>
        <input type="hidden" name="limit" value="${limit}" />
        <button type="submit">Search</button>
      </form>
      ${unreadableBox('index objects', result.unreadable)}
      ${
        result.noIndex
          ? html`<div class="notice" id="no-index">
              This campaign has no trajectory index (its trajectories were stored before the index existed): search
              needs one. The campaign page still lists its trajectories by id.
            </div>`
          : ''
      }
      <p class="muted" id="search-cost">
        ${result.rows.length} shown; ${result.scanned} index entries in ${result.objects} index objects read for this
        page. ${filter.source === 'pool' ? 'Pool contents are listed in key order.' : 'Newest first.'}
      </p>
      ${
        result.budgetHit
          ? html`<div class="notice" id="budget-hit">
              Looked at ${SCAN_BUDGET} entries without filling the page; "next" goes on with older trajectories. Naming
              a task or a policy version makes the search read only that partition.
            </div>`
          : ''
      }
      ${result.rows.length === 0 ? html`<p class="muted" id="no-results">No trajectory matches${before ? ' on this page' : ''}.</p>` : trajectoryTable(campaignId, result.rows, 'results')}
      <div class="pager">
        ${before ? html`<a id="first-page" href="${params({})}">« newest</a>` : ''}
        ${result.next ? html`<a id="next-page" href="${params({ before: result.next })}">next »</a>` : html`<span class="muted">last page</span>`}
      </div>`,
  };
}
