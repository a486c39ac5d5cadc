// ESLint flat config. Type-aware rules need typescript 5.9 (pinned in package.json).
import tseslint from 'typescript-eslint';

// Workflow code runs in Temporal's deterministic sandbox: no Node built-ins, no native modules, no I/O clients.
const forbiddenInWorkflows = {
  patterns: [
    {
      group: ['node:*'],
      message: 'Workflow code runs in a deterministic sandbox: Node modules are not allowed. Use an activity.',
    },
  ],
  paths: [
    ...[
      'fs', 'path', 'os', 'child_process', 'crypto', 'http', 'https', 'net', 'stream', 'worker_threads', 'zlib',
      'events', 'buffer', 'process', 'timers', 'dns', 'tls', 'readline',
    ].map((name) => ({ name, message: 'Node modules are not allowed in workflow code; use an activity.' })),
    { name: 'onnxruntime-node', message: 'onnxruntime belongs in activities (policy server / trainer), never in workflows.' },
    { name: 'minio', message: 'MinIO I/O belongs in activities; workflows carry object keys only.' },
    { name: 'playwright-core', message: 'Browsers belong to env activities, never workflows.' },
    { name: '@temporalio/activity', message: 'Workflows must not import activity-side APIs.' },
    { name: '@temporalio/worker', message: 'Workflows must not import worker-side APIs.' },
    { name: '@temporalio/client', message: 'Workflows must not import the client.' },
  ],
};

export default tseslint.config(
  { ignores: ['node_modules/**', '.tools/**', '.data/**', 'docs/**', 'bin/**', '**/*.mjs'] },
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        // node:test's test()/describe() return promises the runner itself awaits.
        { allowForKnownSafeCalls: [{ from: 'package', name: ['test', 'it', 'describe', 'suite'], package: 'node:test' }] },
      ],
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // Workflows and the Node-free modules they import.
    files: ['workflows/**/*.ts', 'schemas/**/*.ts', 'algorithms/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', forbiddenInWorkflows] },
  }
);
