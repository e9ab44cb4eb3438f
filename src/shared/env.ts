/**
 * One environment variable's value: its own, never a member every object has (`toString`,
 * `constructor`, `__proto__`), and only a string. `undefined` when it is not set.
 */
export function envValue(env: Readonly<Record<string, string | undefined>>, name: string): string | undefined {
  const value = Object.hasOwn(env, name) ? env[name] : undefined;
  return typeof value === 'string' ? value : undefined;
}
