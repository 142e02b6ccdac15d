// Layering is checked here, not trusted (docs/architecture.md, the layers):
// core/, dataplane/ and engine/ are pure; only platform/ and cmd/ touch the OS.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const sideEffectModules = [
  'node:*',
  'child_process',
  'fs',
  'fs/promises',
  'net',
  'dgram',
  'http',
  'https',
  'os',
  'process',
  'dns',
  'pino',
  'prom-client',
  '@kubernetes/client-node',
  'koffi',
  'netlink',
];
const pureRules = {
  'no-restricted-imports': [
    'error',
    {
      patterns: [
        {
          group: sideEffectModules,
          message: 'Pure layers may not import side-effecting modules; inject them from platform/.',
        },
        {
          group: ['**/platform/*', '**/platform/**', '**/cmd/**'],
          message: 'Pure layers may not import platform/ or cmd/.',
        },
      ],
    },
  ],
  'no-restricted-globals': [
    'error',
    { name: 'process', message: 'Inject it; pure layers do not read process state.' },
    { name: 'setTimeout', message: 'Use the injected Clock.' },
    { name: 'setInterval', message: 'Use the injected Clock.' },
    { name: 'setImmediate', message: 'Use the injected Clock.' },
    { name: 'console', message: 'Publish observations; pure layers do not log.' },
  ],
  'no-restricted-properties': [
    'error',
    { object: 'Date', property: 'now', message: 'Use the injected Clock.' },
    { object: 'Math', property: 'random', message: 'Inject randomness.' },
  ],
};

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.cache/**', 'bench/out/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
        setImmediate: 'readonly',
        Buffer: 'readonly',
        URL: 'readonly',
      },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'error',
    },
  },
  {
    files: ['src/core/**/*.ts', 'src/dataplane/**/*.ts', 'src/engine/**/*.ts'],
    ignores: ['**/*.test.ts'],
    rules: pureRules,
  },
  {
    // dataplane sits below engine: renderers, Fakes and tracers take what they
    // need (Clock included) from core.
    files: ['src/dataplane/**/*.ts'],
    ignores: ['**/*.test.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            ...pureRules['no-restricted-imports'][1].patterns,
            { group: ['**/engine/*', '**/engine/**'], message: 'dataplane/ may not import engine/; use core/.' },
          ],
        },
      ],
    },
  },
  {
    // One error hierarchy (src/core/errors.ts): callers branch on a stable code,
    // so src throws ProxyError (or BugError for a broken invariant), never Error.
    files: ['src/**/*.ts'],
    ignores: ['**/*.test.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: "ThrowStatement NewExpression[callee.name='Error']",
          message: 'Throw a ProxyError with a KPT_* code, or a BugError for a broken invariant.',
        },
      ],
    },
  },
);
