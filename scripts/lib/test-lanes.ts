/**
 * `npm test` runs its files in two lanes side by side, each one file at a time: the VLM lane (test/vlm,
 * test/vlm-infra: vLLM servers, torch, the Python trainer — about 14 of the run's minutes, most of it
 * process start-up) and the main lane (everything else). On 2 cores the run was CPU-idle for much of its
 * time (waits on Temporal, heartbeats, process starts), and one lane at a time took 34–38 minutes, over the
 * 30-minute budget. Tests in both lanes share the Temporal dev server and MinIO with their own namespaces,
 * buckets, task queues and free ports, and find their processes by markers, so they do not see each other.
 * DARTFLOW_TEST_LANES=1 runs everything in one lane (as before).
 */
export interface TestLane {
  name: 'main' | 'vlm';
  files: string[];
}

const VLM_DIRS = ['test/vlm/', 'test/vlm-infra/'];

export const isVlmTestFile = (file: string): boolean => VLM_DIRS.some((d) => file.replace(/\\/g, '/').startsWith(d));

/** Splits project-relative test files into lanes (empty lanes left out); `lanes` 1 = one lane with every file. */
export function testLanes(files: readonly string[], lanes: number): TestLane[] {
  if (lanes <= 1) return files.length > 0 ? [{ name: 'main', files: [...files] }] : [];
  const split: TestLane[] = [
    { name: 'main', files: files.filter((f) => !isVlmTestFile(f)) },
    { name: 'vlm', files: files.filter(isVlmTestFile) },
  ];
  return split.filter((l) => l.files.length > 0);
}

/** DARTFLOW_TEST_LANES: 1 or 2 (default 2); anything else is refused, naming the variable. */
export function laneCount(env: NodeJS.ProcessEnv): number {
  const raw = env.DARTFLOW_TEST_LANES?.trim();
  if (!raw) return 2;
  if (raw !== '1' && raw !== '2')
    throw new Error(`DARTFLOW_TEST_LANES=${raw}: use 1 (one file at a time) or 2 (the default)`);
  return Number(raw);
}
