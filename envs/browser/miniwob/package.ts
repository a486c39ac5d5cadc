/**
 * Where the installed MiniWoB++ pages are (`bash infra/install-miniwob.sh` puts the pinned `miniwob` wheel
 * into .tools/miniwob; nothing is vendored) and which task pages exist. A task naming a page that is not
 * there, or a machine without the package, is a TaskConfigError that names the task and the fix.
 */
import fs from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../../../infra/settings';
import { TaskConfigError } from '../../../tasks/errors';
import { MINIWOB_TASK_NAME } from '../../../tasks/miniwob/spec';

/** The pinned wheel version (infra/install-miniwob.sh installs exactly this). */
export const MINIWOB_VERSION = '1.1.0';
export const INSTALL_HINT = 'bash infra/install-miniwob.sh';

/** `…/miniwob/html`: DARTFLOW_MINIWOB_HTML, else where infra/install-miniwob.sh puts it. */
export function miniwobHtmlDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.DARTFLOW_MINIWOB_HTML ?? path.join(PROJECT_ROOT, '.tools', 'miniwob', 'miniwob', 'html');
}

/** Whether the package's runtime is installed (tests skip, with this reason, when it is not). */
export function miniwobInstalled(htmlDir = miniwobHtmlDir()): boolean {
  return fs.existsSync(path.join(htmlDir, 'core', 'core.js'));
}

/** The task pages the installed package ships (130 in 1.1.0). */
export function listMiniwobTasks(htmlDir = miniwobHtmlDir()): string[] {
  assertInstalled(htmlDir);
  return fs
    .readdirSync(path.join(htmlDir, 'miniwob'))
    .filter((f) => f.endsWith('.html'))
    .map((f) => f.slice(0, -'.html'.length))
    .sort();
}

function assertInstalled(htmlDir: string, taskId?: string): void {
  if (!miniwobInstalled(htmlDir))
    throw new TaskConfigError(
      `${taskId ? `task "${taskId}": ` : ''}the MiniWoB++ pages are not installed (no ${path.join(htmlDir, 'core', 'core.js')}); ` +
        `run '${INSTALL_HINT}' on this env worker or set DARTFLOW_MINIWOB_HTML to a miniwob/html folder`,
      undefined,
      'config'
    );
}

/** Path of the page of MiniWoB task `name`, checked to exist. */
export function miniwobTaskFile(name: string, opts: { taskId?: string; htmlDir?: string } = {}): string {
  const htmlDir = opts.htmlDir ?? miniwobHtmlDir();
  const who = opts.taskId ? `task "${opts.taskId}": ` : '';
  if (!MINIWOB_TASK_NAME.test(name))
    throw new TaskConfigError(`${who}"${name}" is not a MiniWoB++ task name`, undefined, 'config');
  assertInstalled(htmlDir, opts.taskId);
  const file = path.join(htmlDir, 'miniwob', `${name}.html`);
  if (!fs.existsSync(file))
    throw new TaskConfigError(
      `${who}MiniWoB++ task "${name}" is not in the installed miniwob package (${path.join(htmlDir, 'miniwob')} ` +
        `has no ${name}.html; ${listMiniwobTasks(htmlDir).length} task pages there)`,
      file,
      'config'
    );
  return file;
}
