/**
 * A policy spec as a JSON file: how a network other than the default (policy.width ≠ 1, an option of
 * policy/architecture-options.ts) reaches policy servers, which start before a campaign's first checkpoint exists.
 * `npm start` writes one per campaign; `dartflow workers --spec-file` and workers/policy-server.ts read it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { validateSpec, type PolicySpec } from './spec';

/** Reads and validates a spec file (throws on a missing file, bad JSON or an invalid spec). */
export function readPolicySpecFile(file: string): PolicySpec {
  return validateSpec(JSON.parse(fs.readFileSync(file, 'utf8')));
}

export function writePolicySpecFile(file: string, spec: PolicySpec): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, JSON.stringify(spec, null, 2));
}
