import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { renderConfigDocs } from '../../scripts/config-docs';

test('docs/configuration.md is generated from the current schema', () => {
  const file = path.join(__dirname, '..', '..', 'docs', 'configuration.md');
  assert.equal(fs.readFileSync(file, 'utf8'), renderConfigDocs(), 'stale: run `npx tsx scripts/config-docs.ts`');
});
