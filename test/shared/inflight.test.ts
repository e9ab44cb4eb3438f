import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { InflightTable } from '../../src/shared/inflight.js';

describe('InflightTable', () => {
  it('answers as a Map does: set, get, has, delete, size, values in insertion order, clear', () => {
    const table = new InflightTable<string, { n: number }>();
    expect(table.set('a', { n: 1 })).toBe(table);
    table.set('b', { n: 2 }).set('c', { n: 3 });
    expect(table.size).toBe(3);
    expect(table.get('b')).toEqual({ n: 2 });
    expect(table.has('c')).toBe(true);
    expect(table.get('zz')).toBeUndefined();
    expect(table.delete('b')).toBe(true);
    expect(table.delete('b')).toBe(false);
    expect(table.has('b')).toBe(false);
    expect(table.get('b')).toBeUndefined();
    // Setting a key already there replaces its value and keeps its place.
    table.set('a', { n: 10 });
    expect(table.values()).toEqual([{ n: 10 }, { n: 3 }]);
    // Set again after a delete: a new entry, last.
    table.set('b', { n: 20 });
    expect(table.values().map((v) => v.n)).toEqual([10, 3, 20]);
    table.clear();
    expect(table.size).toBe(0);
    expect(table.values()).toEqual([]);
    expect(table.get('a')).toBeUndefined();
  });

  it('hands out a snapshot from values(): the table may change while it is walked', () => {
    const table = new InflightTable<number, string>();
    for (let i = 0; i < 4; i++) table.set(i, `v${i}`);
    const seen: string[] = [];
    for (const v of table.values()) {
      seen.push(v);
      table.delete(Number(v.slice(1)) + 1);
      table.set(100 + seen.length, 'late');
    }
    expect(seen).toEqual(['v0', 'v1', 'v2', 'v3']);
  });

  it('keeps a removed entry from being promoted by the collector, where a Map under the same churn promotes it', () => {
    // In a fresh process each: the old generation's growth after young collections only.
    const fixture = fileURLToPath(new URL('../fixtures/inflight-promotion.mjs', import.meta.url));
    const grown = (kind: 'map' | 'table') => Number(execFileSync(process.execPath, [fixture, kind], { encoding: 'utf8' }));
    const map = grown('map');
    const table = grown('table');
    // ~7.5 MiB for the Map on Node 20 and 24 (its stale backing tables keep every removed value),
    // ~1.7 MiB for the table: mostly the stale backing tables themselves (a Map of small integers
    // churned so grows ~1.4 MiB), then the empty boxes and what was in flight at each collection.
    expect(map).toBeGreaterThan(4 * 1024 * 1024);
    expect(table).toBeLessThan(map / 2.5);
  });
});
