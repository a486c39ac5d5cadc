/**
 * Finished and lost groups waiting to be reported in one `groupsFinished` signal, as scheduler shards
 * (to the campaign) and rollout lanes (to their shard) send them: a report is due once `maxBatch` groups
 * wait or `flushMs` after the timer was armed. One timer per batch, not one per loop iteration: each
 * timer costs history events.
 */
import { sleep } from '@temporalio/workflow';
import type { GroupSummary } from '../schemas/campaign';
import type { GroupsFinishedReport } from './messages';

export type ReportContents = Omit<GroupsFinishedReport, 'shardId'>;

export class ReportBatch {
  private contents: ReportContents;
  private timerArmed = false;
  private timerFired = false;

  constructor(
    private readonly opts: { flushMs: number; maxBatch: number; wake: () => void },
    /** What a shard carried across continue-as-new. */
    carried?: ReportContents
  ) {
    this.contents = carried ?? { finished: [], lost: [] };
  }

  finished(g: GroupSummary): void {
    this.contents.finished.push(g);
  }

  lost(groupId: string, why: string): void {
    this.contents.lost.push({ groupId, why });
  }

  get size(): number {
    return this.contents.finished.length + this.contents.lost.length;
  }

  /** The ids waiting (a shard still holds them: the campaign has not got them). */
  ids(): string[] {
    return [...this.contents.finished.map((g) => g.groupId), ...this.contents.lost.map((l) => l.groupId)];
  }

  /** The timer fired or a full batch waits. */
  due(): boolean {
    return this.timerFired || this.size >= this.opts.maxBatch;
  }

  /** Empties the batch (and clears a fired timer); undefined when nothing waits. */
  take(): ReportContents | undefined {
    this.timerFired = false;
    if (this.size === 0) return undefined;
    const out = this.contents;
    this.contents = { finished: [], lost: [] };
    return out;
  }

  /** What waits, for a shard's continue-as-new. */
  carry(): ReportContents {
    return this.contents;
  }

  /** Arms the flush timer when groups wait and none is armed. */
  armTimer(): void {
    if (this.size === 0 || this.timerArmed) return;
    this.timerArmed = true;
    void sleep(this.opts.flushMs).then(() => {
      this.timerArmed = false;
      this.timerFired = true;
      this.opts.wake();
    });
  }
}
