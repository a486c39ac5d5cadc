/**
 * A prebuilt workflow bundle for the orchestrator workers of one `npm test` run. Every orchestrator worker
 * start bundles dartflow's workflows with webpack (≈4 s of CPU on this machine, more when it is busy); a test
 * run starts a few dozen of them (role processes, the restarts of the kill and chaos tests), so scripts/test.ts
 * bundles once at its start and hands the file to the run's processes through DARTFLOW_WORKFLOW_BUNDLE (set
 * only in their environment, gone with the run). The file is trusted to match the sources of the run it was
 * built for: it is not for deployments (a stale bundle would run old workflow code). A worker uses it only
 * when it was built from the worker's own project root: a worker started from another checkout (an older
 * release in an upgrade test) bundles its own code.
 */
import fs from 'node:fs';
import path from 'node:path';
import { bundleWorkflowCode, type WorkerOptions } from '@temporalio/worker';
import { payloadGuardInterceptors } from '../infra/payload-guard';
import { PROJECT_ROOT } from '../infra/settings';

export const WORKFLOW_BUNDLE_ENV = 'DARTFLOW_WORKFLOW_BUNDLE';

const WORKFLOWS_PATH = path.join(PROJECT_ROOT, 'workflows', 'index.ts');

interface BundleMeta {
  projectRoot: string;
  builtAt: string;
}

const metaPathOf = (codePath: string): string => `${codePath}.meta.json`;

/** Bundles the orchestrator's workflows (with the payload guard's workflow interceptor) into `dir`; returns the file. */
export async function writeOrchestratorBundle(dir: string): Promise<string> {
  const { code } = await bundleWorkflowCode({
    workflowsPath: WORKFLOWS_PATH,
    workflowInterceptorModules: payloadGuardInterceptors({ workflows: true }).workflowModules ?? [],
  });
  fs.mkdirSync(dir, { recursive: true });
  const codePath = path.join(dir, 'orchestrator-workflows.js');
  fs.writeFileSync(codePath, code);
  const meta: BundleMeta = { projectRoot: PROJECT_ROOT, builtAt: new Date().toISOString() };
  fs.writeFileSync(metaPathOf(codePath), JSON.stringify(meta));
  return codePath;
}

/** The prebuilt bundle named by DARTFLOW_WORKFLOW_BUNDLE when it was built from this project root, else null. */
export function prebuiltOrchestratorBundle(env: NodeJS.ProcessEnv = process.env): string | null {
  const codePath = env[WORKFLOW_BUNDLE_ENV]?.trim();
  if (!codePath) return null;
  try {
    const meta = JSON.parse(fs.readFileSync(metaPathOf(codePath), 'utf8')) as Partial<BundleMeta>;
    return meta.projectRoot === PROJECT_ROOT && fs.existsSync(codePath) ? codePath : null;
  } catch {
    return null;
  }
}

/**
 * The orchestrator worker's workflow code options: the prebuilt bundle (its interceptor is inside), or the
 * workflows' source with the payload guard's workflow interceptor (bundled by Worker.create).
 */
export function orchestratorWorkflowCode(
  env: NodeJS.ProcessEnv = process.env
): Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath'> & { workflowInterceptors: boolean } {
  const codePath = prebuiltOrchestratorBundle(env);
  return codePath
    ? { workflowBundle: { codePath }, workflowInterceptors: false }
    : { workflowsPath: WORKFLOWS_PATH, workflowInterceptors: true };
}
