#!/usr/bin/env node
// `dartflow` CLI entry: runs the TypeScript CLI in this very process through tsx's require hook (no build
// step and no wrapper process), so the pid a user sees is the CLI itself and `kill <pid>` reaches the code
// that stops the roles it started.
require('tsx/cjs');
require('../cli/main.ts').runCli(process.argv.slice(2));
