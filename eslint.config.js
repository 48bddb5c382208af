// ESLint for every JS file of the repository: the npm package, its tests, the browser suites,
// the scripts and the playground's static page. `npm run lint` (run by .ci/run).
import js from '@eslint/js';
import globals from 'globals';

export default [
  {
    ignores: ['**/node_modules/', 'target/', 'lock-wasm/js/engine/', 'web-demo/dist/', 'lock-core/fuzz/'],
  },
  js.configs.recommended,
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: {
      ecmaVersion: 2024,
      sourceType: 'module',
      globals: { ...globals.node, ...globals.browser },
    },
    rules: {
      'no-unused-vars': ['error', { argsIgnorePattern: '^_', caughtErrors: 'none' }],
      eqeqeq: ['error', 'always'],
      'prefer-const': 'error',
      'no-var': 'error',
      'no-shadow': 'error',
      'no-implicit-coercion': 'error',
      'no-throw-literal': 'error',
      'prefer-promise-reject-errors': 'error',
    },
  },
];
