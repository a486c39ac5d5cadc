/**
 * Pieces the index-backed pages share: the trajectory table (rows straight from index entries: no
 * manifest read per row), the notice for unreadable index objects, and time bucketing for charts.
 */
import { html, href, isoTime, num, type Html } from '../html';
import { outcomeOf, type SearchRow } from '../index-reader';

export function trajectoryTable(campaignId: string, rows: SearchRow[], id = 'trajectories'): Html {
  return html`<table id="${id}" class="trajectories">
    <thead>
      <tr>
        <th>trajectory</th>
        <th>group</th>
        <th>task</th>
        <th>outcome</th>
        <th>reward</th>
        <th>steps</th>
        <th>policy versions</th>
        <th>source</th>
        <th>${rows.some((r) => r.pooledAt !== undefined) ? 'pooled' : 'created'}</th>
      </tr>
    </thead>
    <tbody>
      ${rows.map((r) => {
        const outcome = outcomeOf(r);
        return html`<tr data-trajectory="${r.trajectoryId}" data-outcome="${outcome}">
          <td><a href="${href('campaigns', campaignId, 'trajectories', r.trajectoryId)}">${r.trajectoryId}</a></td>
          <td><a href="${href('campaigns', campaignId, 'groups', r.groupId)}">${r.groupId}</a></td>
          <td><a href="${href('campaigns', campaignId, 'tasks', r.taskId)}">${r.taskId}</a></td>
          <td class="${outcome === 'success' ? 'ok' : 'bad'}">${outcome === 'error' ? r.status : outcome}</td>
          <td class="num">${num(r.reward)}</td>
          <td class="num">${r.steps} / ${r.maxSteps}</td>
          <td>v${r.minVersion}${r.maxVersion !== r.minVersion ? `–v${r.maxVersion}` : ''}</td>
          <td>${r.pooledAt !== undefined ? 'pool' : r.source}</td>
          <td>${isoTime(r.pooledAt ?? r.createdAt)}</td>
        </tr>`;
      })}
    </tbody>
  </table>`;
}

/** Index objects (or records) that could not be read: named with their key and why, the rest still shown. */
export function unreadableBox(what: string, bad: Array<{ key: string; message: string }>): Html | string {
  if (bad.length === 0) return '';
  return html`<div class="error-box unreadable">
    <p>${bad.length} ${what} could not be read; what they hold is missing below:</p>
    <ul>
      ${bad.map((u) => html`<li><code>${u.key}</code>: ${u.message}</li>`)}
    </ul>
  </div>`;
}

/**
 * Splits time-ordered items into at most `buckets` consecutive runs of equal size (so every point of a
 * "rate over time" chart rests on the same number of episodes).
 */
export function equalBuckets<T>(sorted: T[], buckets: number): T[][] {
  if (sorted.length === 0) return [];
  const size = Math.ceil(sorted.length / Math.max(1, buckets));
  const out: T[][] = [];
  for (let i = 0; i < sorted.length; i += size) out.push(sorted.slice(i, i + size));
  return out;
}

export const mean = (xs: number[]): number => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);
