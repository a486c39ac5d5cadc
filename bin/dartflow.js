#!/usr/bin/env node
// `dartflow` CLI entry: runs the TypeScript CLI through tsx (no build step).
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const cli = path.join(__dirname, '..', 'cli', 'main.ts');
const tsx = require.resolve('tsx/cli');
const r = spawnSync(process.execPath, [tsx, cli, ...process.argv.slice(2)], { stdio: 'inherit' });
process.exit(r.status ?? 1);
