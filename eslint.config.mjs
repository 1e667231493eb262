// ESLint (flat config): the recommended JavaScript and typescript-eslint rules. Formatting is
// Prettier's job (`npm run format`), so no stylistic rules here. `npm run lint` runs both.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'dist-bench/', 'coverage/', 'node_modules/', '.toolgate/'] },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    rules: {
      // `_`-prefixed names are deliberately unused (a required parameter, a skipped tuple slot).
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      // A `let` first read by a callback that is created before its one assignment cannot be const.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
    },
  },
  {
    // Tests read JSON replies whose shape is what they assert: `any` there is the honest type.
    // Production code keeps the rule (no `any` at module boundaries).
    // Some suites load a module only inside the test that needs it (docker, a config read late).
    files: ['test/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off', '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    // Plain CommonJS files run by Node itself (configuration, test fixtures).
    files: ['**/*.js', '**/*.cjs'],
    languageOptions: {
      sourceType: 'commonjs',
      globals: {
        __dirname: 'readonly',
        __filename: 'readonly',
        process: 'readonly',
        console: 'readonly',
        Buffer: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
        fetch: 'readonly',
        performance: 'readonly',
      },
    },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
