/** Tests import the TypeScript sources through ts-jest; end-to-end tests spawn the compiled
 *  binaries in dist/ (built by `npm test`'s pretest step). Type errors are caught by the
 *  build, so ts-jest only transpiles. `@modelcontextprotocol/ext-tasks` (the official tasks
 *  client, used by the task suites) ships ES modules only: it is mapped to its files and
 *  transpiled to CommonJS like our own code; so is `jose` (the OAuth endpoint's JOSE library),
 *  which the compiled gateway loads with Node's require(esm). */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  moduleNameMapper: {
    '^@modelcontextprotocol/ext-tasks/(client|core|receiver)$': '<rootDir>/node_modules/@modelcontextprotocol/ext-tasks/dist/$1/index.js',
  },
  transformIgnorePatterns: ['/node_modules/(?!(@modelcontextprotocol/ext-tasks|jose)/)'],
  transform: {
    '^.+\\.ts$': ['ts-jest', { diagnostics: false, tsconfig: { isolatedModules: true } }],
    'node_modules/(@modelcontextprotocol/ext-tasks|jose)/.+\\.js$': ['ts-jest', { diagnostics: false, tsconfig: { allowJs: true, isolatedModules: true } }],
  },
  testTimeout: 30000,
  maxWorkers: 2,
};
