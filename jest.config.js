/** Tests import the TypeScript sources through ts-jest; end-to-end tests spawn the compiled
 *  binaries in dist/ (built by `npm test`'s pretest step). Type errors are caught by the
 *  build, so ts-jest only transpiles. */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: { '^.+\\.ts$': ['ts-jest', { diagnostics: false, tsconfig: { isolatedModules: true } }] },
  testTimeout: 30000,
  maxWorkers: 2,
};
