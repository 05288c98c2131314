// The import rules of the house, checked by `npm run check` (npm run lint:imports).
// api/ is the contract: it imports none of the others. operator/ (control plane) and
// runtime/ (data plane) import api/ and never each other; roles/ assembles them; cli/
// (the commands for people and pipelines) uses api/ and runtime/, never operator/ or roles/.
// testing/ (the test API server) imports none of the product, so it can catch the
// product's mistakes; test/ may import anything; product code never imports tests,
// nor a devDependency (the image installs production dependencies only).
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'An import circle: the arrows must run one way.',
      from: { path: '^(api|operator|runtime|roles|cli)/' },
      to: { circular: true },
    },
    {
      name: 'api-is-the-contract',
      severity: 'error',
      comment: 'api/ is shared by both halves and imports neither of them.',
      from: { path: '^api/' },
      to: { path: '^(operator|runtime|roles|cli|testing|test|bench|infra)/' },
    },
    {
      name: 'operator-not-to-runtime',
      severity: 'error',
      comment: 'The control plane shares only the contract (api/) with the data plane.',
      from: { path: '^operator/' },
      to: { path: '^(runtime|roles|cli)/' },
    },
    {
      name: 'runtime-not-to-operator',
      severity: 'error',
      comment: 'The data plane takes only the contract (api/) from the control plane.',
      from: { path: '^runtime/' },
      to: { path: '^(operator|roles|cli)/' },
    },
    {
      name: 'cli-is-a-client',
      severity: 'error',
      comment:
        'The CLI (cli/) uses the contract and the runtime documents; it starts no servers or controllers.',
      from: { path: '^cli/' },
      to: { path: '^(operator|roles)/' },
    },
    {
      name: 'product-not-to-tests',
      severity: 'error',
      comment: 'Product code never imports tests, test libraries or benchmarks.',
      from: { path: '^(api|operator|runtime|roles|cli)/' },
      to: { path: '^(test|testing|bench)/' },
    },
    {
      name: 'testing-has-its-own-code',
      severity: 'error',
      comment:
        'The test API server reproduces a real one with its own code, so it can catch the product.',
      from: { path: '^testing/' },
      to: { path: '^(api|operator|runtime|roles|cli)/' },
    },
    {
      name: 'product-not-to-dev-dependencies',
      severity: 'error',
      comment: 'The image and production installs have no devDependencies.',
      from: { path: '^(api|operator|runtime|roles|cli)/' },
      to: { dependencyTypes: ['npm-dev'] },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: require('node:path').join(__dirname, 'tsconfig.json') },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
    },
  },
};
