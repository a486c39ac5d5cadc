/**
 * The campaign's version lineage: the newest checkpoints with their parents (workflows/logic/lineage.ts:
 * every trained version has the version its train step started from as parent). A version whose parent
 * is not the version before it was trained after the head moved back — a rollback (refused model
 * rollout) or a pin; versions off the head's line are abandoned branches (their data is never trained).
 * Pins, served versions and the rollback count come from the running campaign's status query.
 */
import type { CampaignStatus } from '../../schemas/campaign';
import type { CheckpointManifest } from '../../schemas/records';
import { html, isoTime, num, type Html } from '../html';
import type { NewestPage } from '../history-reader';

export function lineageSection(
  page: NewestPage<CheckpointManifest>,
  head: number | undefined,
  live: CampaignStatus | undefined
): Html {
  if (page.highest < 0) return html`<p class="muted" id="no-lineage">No checkpoint stored yet.</p>`;
  const byVersion = new Map(page.items.flatMap((i) => (i.value ? [[i.number, i.value] as const] : [])));
  const top = head ?? page.highest;
  // The head's line within the versions shown: head, its parent, grandparent …
  const line = new Set<number>();
  for (
    let v: number | null | undefined = top;
    v !== null && v !== undefined && !line.has(v);
    v = byVersion.get(v)?.parentVersion
  )
    line.add(v);
  const lowestOnLine = Math.min(...line);
  const servedBy = new Map<number, string[]>();
  for (const [server, v] of Object.entries(live?.servedVersions ?? {}))
    servedBy.set(v, [...(servedBy.get(v) ?? []), server]);
  const branchPoints = page.items.filter(
    (i) => line.has(i.number) && i.value && i.value.parentVersion !== null && i.value.parentVersion !== i.number - 1
  );

  return html`<p class="muted" id="lineage-summary">
      Head
      v${top}${live ? html`; pinned ${live.pinnedVersion === null ? 'none' : `v${live.pinnedVersion}`}; model rollouts rolled back: ${live.rolledBack}` : ''};
      ${branchPoints.length} version(s) on the head's line trained after a rollback or a pin. Showing the newest
      ${page.items.length} of ${page.highest + 1} version numbers.
    </p>
    <table id="lineage">
      <thead>
        <tr>
          <th>version</th>
          <th>parent</th>
          <th>on the head's line</th>
          <th>event</th>
          <th>served by</th>
          <th>train step</th>
          <th>loss</th>
          <th>created</th>
        </tr>
      </thead>
      <tbody>
        ${page.items.map((i) => {
          const m = i.value;
          if (!m)
            return html`<tr data-version="${i.number}" class="broken">
              <td>v${i.number}</td>
              <td colspan="7" class="${i.missing ? 'muted' : 'bad'}">
                ${i.missing ? `no manifest (${i.key})` : i.error}
              </td>
            </tr>`;
          const onLine = line.has(i.number);
          const events: string[] = [];
          if (i.number === top) events.push('head');
          if (live?.pinnedVersion === i.number) events.push('pinned');
          // A parent other than the version before: on the head's line the head had moved back (a rollback or
          // a pin) before this version's train step started; off the line it is just where the branch began.
          if (m.parentVersion !== null && m.parentVersion !== i.number - 1)
            events.push(
              onLine
                ? `trained from v${m.parentVersion} after a rollback or pin (not from v${i.number - 1})`
                : `trained from v${m.parentVersion}`
            );
          if (!onLine && i.number > lowestOnLine) events.push('abandoned branch');
          const step = m.ledgerKey ? /step-(\d+)\.json$/.exec(m.ledgerKey)?.[1] : undefined;
          return html`<tr data-version="${i.number}" class="${onLine ? 'on-line' : 'off-line'}">
            <td>v${i.number}</td>
            <td>${m.parentVersion === null ? 'root' : `v${m.parentVersion}`}</td>
            <td class="${onLine ? 'ok' : i.number > lowestOnLine ? 'bad' : 'muted'}">
              ${onLine ? 'yes' : i.number > lowestOnLine ? 'no' : '?'}
            </td>
            <td class="event">${events.join('; ')}</td>
            <td>${(servedBy.get(i.number) ?? []).join(', ')}</td>
            <td class="num">${step ? Number(step) : '—'}</td>
            <td class="num">${num(m.metrics.loss)}</td>
            <td>${isoTime(m.createdAt)}</td>
          </tr>`;
        })}
      </tbody>
    </table>`;
}
