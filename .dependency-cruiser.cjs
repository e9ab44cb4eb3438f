/**
 * The one-way arrows of DESIGN.md "Folders", checked by test/architecture.test.ts (`npm test`)
 * and by `npx depcruise src`. Layers, top to bottom: the CLI (`cli.cts` and `cli.ts`, `cli-main.ts`, `cli-bundle.cts`, `cli-early.ts`, `commands/`, `index.ts`)
 * → `transports/` → `gateway.ts` → `builtins/`, `flows/`, `tasks/` (callers of the broker path)
 * → `broker/` → `router/` → `upstream/` → the bottom (`wire/`, `store/`, `audit/`, `config/`,
 * `shared/`). A folder may import its own layer and any
 * below it, never one above. Type-only imports count: a type is a dependency too.
 */
const TOP = '^src/(cli|cli-main|cli-bundle|cli-early|index)\\.c?ts$|^src/commands/';
const CALLERS = '^src/(builtins|flows|tasks)/';
const layers = [
  { name: 'transports', path: '^src/transports/', above: [TOP] },
  { name: 'gateway', path: '^src/gateway\\.ts$', above: [TOP, '^src/transports/'] },
  { name: 'builtins-flows-tasks', path: CALLERS, above: [TOP, '^src/transports/', '^src/gateway\\.ts$'] },
  { name: 'broker', path: '^src/broker/', above: [TOP, '^src/transports/', '^src/gateway\\.ts$', CALLERS] },
  { name: 'router', path: '^src/router/', above: [TOP, '^src/transports/', '^src/gateway\\.ts$', CALLERS, '^src/broker/'] },
  { name: 'upstream', path: '^src/upstream/', above: [TOP, '^src/transports/', '^src/gateway\\.ts$', CALLERS, '^src/broker/', '^src/router/'] },
];

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    ...layers.map(({ name, path, above }) => ({
      name: `${name}-imports-no-layer-above`,
      comment: `${name} sits below ${above.join(', ')} (DESIGN.md "Folders": transports → gateway → broker → router → upstream)`,
      severity: 'error',
      from: { path },
      to: { path: above.join('|') },
    })),
    {
      name: 'shared-imports-nothing-of-ours',
      comment: 'shared/ is the bottom: errors, clock, ids, logger, scrubbing',
      severity: 'error',
      from: { path: '^src/shared/' },
      to: { path: '^src/', pathNot: '^src/shared/' },
    },
    {
      name: 'wire-imports-only-shared',
      comment: 'wire/ is the byte-level hot path, used by upstream/, broker/ and transports/: it imports only shared/',
      severity: 'error',
      from: { path: '^src/wire/' },
      to: { path: '^src/', pathNot: '^src/(wire|shared)/' },
    },
    {
      name: 'config-imports-only-shared',
      comment: 'config/ imports nothing of ours above it (DESIGN.md "Folders")',
      severity: 'error',
      from: { path: '^src/config/' },
      to: { path: '^src/', pathNot: '^src/(config|shared)/' },
    },
    {
      name: 'audit-and-store-import-only-the-bottom',
      comment: 'audit/ and store/ import nothing of ours above them: only config/ and shared/',
      severity: 'error',
      from: { path: '^src/(audit|store)/' },
      to: { path: '^src/', pathNot: '^src/(audit|store|config|shared)/|^src/version\\.ts$' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
