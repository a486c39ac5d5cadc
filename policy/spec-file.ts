/**
 * A policy spec as a JSON file: pins a policy server to one network (`dartflow workers --spec-file`,
 * DARTFLOW_POLICY_SPEC_FILE, read by workers/policy-server.ts). Without one a server serves the network each
 * checkpoint names (rollout/checkpoint.ts readCheckpoint), so campaigns of any architecture need no file.
 */
import fs from 'node:fs';
import { validateSpec, type PolicySpec } from './spec';

/** Reads and validates a spec file (throws on a missing file, bad JSON or an invalid spec). */
export function readPolicySpecFile(file: string): PolicySpec {
  return validateSpec(JSON.parse(fs.readFileSync(file, 'utf8')));
}
