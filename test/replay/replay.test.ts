/**
 * Replay of recorded campaign histories against the current workflow code (issue 12): the gate before a
 * deploy under a running campaign (docs/upgrades.md). A workflow change that alters the commands a
 * recorded run produced fails here as a DeterminismViolationError naming the workflow and the event,
 * before a live campaign meets it. The histories come from a real campaign on the dev server
 * (scripts/record-histories.ts): every run of the campaign (continue-as-new, Updates, signals from its
 * children, a terminated child), a task group, the terminated task group, a train step, a model rollout
 * that dropped a dead policy server, and an evaluation; and a second, short campaign through the
 * pre-collection phase (curation.precollect, behind the patch `campaign-precollect-phase`) with its
 * precollectWorkflow child.
 *
 * Offline: replay needs no server. The bundle is built once (one runReplayHistories call) with the same
 * workflowsPath and workflow interceptors as workers/orchestrator-worker.ts.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { before, test } from 'node:test';
import { historyFromJSON, type History } from '@temporalio/common/lib/proto-utils';
import { temporal } from '@temporalio/proto';
import { Worker, type ReplayResult } from '@temporalio/worker';
import { installQuietRuntime } from '../../infra/runtime';
import { payloadGuardInterceptors } from '../../infra/payload-guard';
import { HISTORIES_DIR, loadRecordedHistories, readHistoryJson, type RecordedHistory } from './recorded-histories';

const EventType = temporal.api.enums.v1.EventType;
type Json = Record<string, unknown>;
type JsonEvent = Json & { eventType: string };

const recorded: RecordedHistory[] = loadRecordedHistories();
/** Copies of recorded histories changed the way a careless code change would change the commands. */
const divergent: { workflowId: string; runId: string; history: History; what: string; because: RegExp }[] = [];
/** By run id: every run of the campaign shares its workflow id. */
const results = new Map<string, ReplayResult>();

const has = (h: History, t: temporal.api.enums.v1.EventType): boolean =>
  (h.events ?? []).some((e) => e.eventType === t);
const ofType = (type: string): RecordedHistory[] => recorded.filter((r) => r.workflowType === type);
/** The runs of the main set's long campaign (the precollect set has a campaign of its own). */
const mainCampaignRuns = (): RecordedHistory[] => ofType('campaignWorkflow').filter((r) => r.set === 'main');
const precollectCampaignRuns = (): RecordedHistory[] =>
  ofType('campaignWorkflow').filter((r) => r.set === 'precollect');
/** The patch ids a history's markers record (workflow patches are markers named core_patch, the id in their patch-data payload). */
function patchIds(h: History): string[] {
  return (h.events ?? []).flatMap((e) => {
    const attrs = e.markerRecordedEventAttributes;
    if (attrs?.markerName !== 'core_patch') return [];
    const id = attrs.details?.['patch-data']?.payloads?.[0]?.data;
    return id ? [JSON.parse(Buffer.from(id).toString('utf8')) as { id?: string }].map((d) => d.id ?? '') : [];
  });
}
const childTypesStarted = (h: History): string[] =>
  (h.events ?? []).flatMap((e) => {
    const name = e.startChildWorkflowExecutionInitiatedEventAttributes?.workflowType?.name;
    return name ? [name] : [];
  });

/**
 * A copy of a recorded history with the first event of `eventType` changed by `edit`, under its own run id
 * (the replayer takes the run id from the history; the original is replayed in the same batch).
 */
function mutated(
  file: string,
  runId: string,
  eventType: string,
  edit: (e: JsonEvent) => void,
  which: (e: JsonEvent) => boolean = () => true
): History {
  const json = readHistoryJson(file) as { events: JsonEvent[] };
  const started = json.events[0]?.workflowExecutionStartedEventAttributes as Json | undefined;
  assert.ok(started, `${file} begins with WorkflowExecutionStarted`);
  started.originalExecutionRunId = runId;
  const event = json.events.find((e) => e.eventType === eventType && which(e));
  assert.ok(event, `${file} has a ${eventType} event to change`);
  edit(event);
  return historyFromJSON(json);
}

before(async () => {
  installQuietRuntime();
  const train = ofType('trainStepWorkflow')[0]!;
  divergent.push({
    workflowId: 'divergent-activity-type',
    runId: '00000000-0000-4000-8000-000000000001',
    what: 'the train step scheduled an activity of another type',
    because: /Activity type of scheduled event 'trainStepRenamed' does not match/,
    history: mutated(train.file, '00000000-0000-4000-8000-000000000001', 'EVENT_TYPE_ACTIVITY_TASK_SCHEDULED', (e) => {
      ((e.activityTaskScheduledEventAttributes as Json).activityType as Json).name = 'trainStepRenamed';
    }),
  });
  const run0 = mainCampaignRuns()[0]!;
  divergent.push({
    workflowId: 'divergent-child-type',
    runId: '00000000-0000-4000-8000-000000000002',
    what: 'the campaign started a child of another workflow type',
    because: /Child workflow type of scheduled event 'renamedWorkflow' does not match/,
    history: mutated(
      run0.file,
      '00000000-0000-4000-8000-000000000002',
      'EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED',
      (e) => {
        ((e.startChildWorkflowExecutionInitiatedEventAttributes as Json).workflowType as Json).name = 'renamedWorkflow';
      }
    ),
  });
  // The pre-collection phase changed carelessly: the campaign starts another workflow type where it
  // started its precollectWorkflow child.
  const pre = precollectCampaignRuns()[0];
  const childType = (e: JsonEvent): Json =>
    (e.startChildWorkflowExecutionInitiatedEventAttributes as Json).workflowType as Json;
  if (pre)
    divergent.push({
      // Its own workflow id: the campaign names the child after it (`<workflow id>-precollect`), and only
      // the type may differ for the divergence to be the one meant.
      workflowId: pre.workflowId,
      runId: '00000000-0000-4000-8000-000000000003',
      what: 'the campaign started another workflow in place of its pre-collection',
      because:
        /Child workflow type of scheduled event 'taskGroupWorkflow' does not match child workflow type of command 'precollectWorkflow'/,
      history: mutated(
        pre.file,
        '00000000-0000-4000-8000-000000000003',
        'EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED',
        (e) => {
          childType(e).name = 'taskGroupWorkflow';
        },
        (e) => childType(e).name === 'precollectWorkflow'
      ),
    });

  const histories = [
    ...recorded.map((r) => ({ workflowId: r.workflowId, history: r.history })),
    ...divergent.map((d) => ({ workflowId: d.workflowId, history: d.history })),
  ];
  for await (const result of Worker.runReplayHistories(
    {
      // Exactly what the orchestrator worker runs: the same entry module and workflow interceptors.
      workflowsPath: require.resolve('../../workflows'),
      interceptors: payloadGuardInterceptors({ workflows: true }),
      replayName: 'dartflow-replay',
    },
    histories
  )) {
    results.set(result.runId, result);
  }
});

test('the committed histories are all listed in the index, and the index lists only files that exist', () => {
  const onDisk = fs
    .readdirSync(HISTORIES_DIR)
    .filter((f) => f !== 'index.json')
    .sort();
  assert.deepEqual(recorded.map((r) => r.file).sort(), onDisk);
  for (const r of recorded) {
    assert.equal(r.history.events?.length, r.events, `${r.file}: event count as recorded`);
    assert.equal(r.history.events?.[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name, r.workflowType);
  }
});

test('the recorded set covers continue-as-new, every Update, every child signal, housekeeping, a child failure and a dropped server', () => {
  const campaignRuns = mainCampaignRuns();
  assert.ok(campaignRuns.length >= 2, `several campaign runs (got ${campaignRuns.length})`);
  const ran = (t: temporal.api.enums.v1.EventType) => campaignRuns.filter((r) => has(r.history, t)).length;
  assert.equal(
    ran(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW),
    campaignRuns.length - 1,
    'every run but the last continued as new'
  );
  assert.ok(
    campaignRuns
      .slice(1)
      .every((r) => r.history.events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId),
    'every later run was started by continue-as-new'
  );
  const events = campaignRuns.flatMap((r) => r.history.events ?? []);
  const updates = new Set(
    events.map((e) => e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input?.name)
  );
  for (const u of ['pause', 'resume', 'setConfig', 'quarantineTask', 'pinCheckpoint'])
    assert.ok(updates.has(u), `Update ${u}`);
  const signals = new Set(events.map((e) => e.workflowExecutionSignaledEventAttributes?.signalName));
  for (const sig of ['groupFinished', 'trainStepFinished', 'modelRolledOut', 'evalFinished'])
    assert.ok(signals.has(sig), `signal ${sig} from a child`);
  // Housekeeping (a 30 s timer, then the policy-server refresh as a local activity) ran in some run.
  assert.ok(ran(EventType.EVENT_TYPE_TIMER_FIRED) >= 1, 'a housekeeping timer fired');
  assert.ok(ran(EventType.EVENT_TYPE_MARKER_RECORDED) >= 1, 'a local activity');
  assert.ok(ran(EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TERMINATED) >= 1, 'a child failure seen by the campaign');
  const groups = ofType('taskGroupWorkflow');
  assert.ok(
    groups.some((r) => has(r.history, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED)),
    'the terminated child'
  );
  assert.ok(
    groups.some((r) => has(r.history, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED)),
    'a completed task group'
  );
  assert.ok(
    ofType('modelRolloutWorkflow').some((r) => has(r.history, EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT)),
    'a rollout whose dead server never picked its reload up'
  );
  for (const type of ['trainStepWorkflow', 'evaluateWorkflow']) assert.ok(ofType(type).length >= 1, type);
});

test('the precollect set covers a campaign through the pre-collection phase and its precollectWorkflow child', () => {
  const runs = precollectCampaignRuns();
  assert.ok(runs.length >= 1, 'a recorded campaign with curation.precollect (scripts/record-histories.ts)');
  const [first] = runs;
  assert.ok(patchIds(first!.history).includes('campaign-precollect-phase'), 'the patch marker of the phase');
  const children = childTypesStarted(first!.history);
  assert.ok(children.includes('precollectWorkflow'), `a precollectWorkflow child (children: ${children.join(', ')})`);
  // The phase runs before RL: the pre-collection is started before any task group of the main loop.
  const firstGroup = children.indexOf('taskGroupWorkflow');
  assert.ok(firstGroup === -1 || children.indexOf('precollectWorkflow') < firstGroup, children.join(', '));
  assert.ok(
    has(first!.history, EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED),
    'a child completed (the pre-collection returned)'
  );
  const precollect = ofType('precollectWorkflow');
  assert.equal(precollect.length, 1, 'the pre-collection child itself');
  assert.ok(has(precollect[0]!.history, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED));
  assert.ok(
    childTypesStarted(precollect[0]!.history).every((t) => t === 'taskGroupWorkflow') &&
      childTypesStarted(precollect[0]!.history).length >= 1,
    'it ran its attempts as task groups'
  );
  assert.ok(divergent.some((d) => d.runId === '00000000-0000-4000-8000-000000000003'));
});

test('the shards sets cover a shard from before rollout lanes and one with lanes, across continue-as-new', () => {
  const shards = ofType('rolloutShardWorkflow');
  const legacy = shards.filter((r) => r.set === 'shards-legacy');
  const lanes = shards.filter((r) => r.set === 'shards');
  assert.ok(legacy.length >= 2 && lanes.length >= 2, 'both recordings hold several runs of one shard');
  // Recorded by the code before lanes: every group its own child, and no lane patch marker.
  const legacyChildren = legacy.flatMap((r) => childTypesStarted(r.history));
  assert.ok(
    legacyChildren.length >= 1 && legacyChildren.every((t) => t === 'taskGroupWorkflow'),
    legacyChildren.join()
  );
  assert.ok(legacy.every((r) => !patchIds(r.history).includes('shard-runs-groups-in-lanes')));
  const laneChildren = lanes.flatMap((r) => childTypesStarted(r.history));
  assert.ok(laneChildren.length >= 2 && laneChildren.every((t) => t === 'rolloutLaneWorkflow'), laneChildren.join());
  // Every run but the last of each recording ended in continue-as-new (what it carried replays in the next).
  for (const r of [...legacy.slice(0, -1), ...lanes.slice(0, -1)])
    assert.ok(has(r.history, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW), `${r.file} continued-as-new`);
  const [lane] = ofType('rolloutLaneWorkflow');
  assert.ok(lane && has(lane.history, EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED), 'a lane ran episodes');
  assert.ok(has(lane.history, EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED), 'and reported them');
});

test('every recorded history replays against the current workflow code without nondeterminism', () => {
  const failures: string[] = [];
  for (const r of recorded) {
    const result = results.get(r.runId);
    if (!result) failures.push(`${r.file} (${r.workflowId}): not replayed`);
    else if (result.error)
      failures.push(`${r.file} (${r.workflowType} ${r.workflowId}): ${result.error.name}: ${result.error.message}`);
  }
  assert.deepEqual(
    failures,
    [],
    `replay failed — a workflow change needs a patch (docs/upgrades.md):\n${failures.join('\n')}`
  );
  assert.equal(results.size, recorded.length + divergent.length);
});

test('a history that diverges from the code fails replay with DeterminismViolationError', () => {
  for (const d of divergent) {
    const result = results.get(d.runId);
    assert.equal(result?.workflowId, d.workflowId, `${d.what}: replayed`);
    const error = result?.error;
    assert.ok(error, `${d.what}: replay must fail`);
    assert.equal(error.name, 'DeterminismViolationError', `${d.what}: ${error.name}: ${error.message}`);
    assert.match(error.message, d.because, `${d.what}: for that reason`);
  }
});
