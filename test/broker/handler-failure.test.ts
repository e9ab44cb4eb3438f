import { describe, expect, it } from 'vitest';
import { handlerFailure } from '../../src/broker/handler-failure.js';
import { text } from './support.js';

describe('handlerFailure (seed 000_13a5a3abd08ace07.txt)', () => {
  it('isError: true is a failure, carrying its first text', () => {
    expect(handlerFailure(text('bad input', { isError: true }))).toBe('bad input');
    expect(handlerFailure({ content: [], isError: true })).toBe('the tool reported an error');
  });

  it('a top-level success: false in structuredContent is a failure, with its error or message', () => {
    expect(handlerFailure(text('{}', { structuredContent: { success: false, error: 'asset locked' } }))).toBe('asset locked');
    expect(handlerFailure(text('x', { structuredContent: { success: false, message: 'refused' } }))).toBe('refused');
    expect(handlerFailure(text('x', { structuredContent: { success: false } }))).toBe('the tool reported success: false');
  });

  it('issue 17 §10: a text block holding JSON with success: false is data by default (a file read, a fetched body), not a verdict', () => {
    expect(handlerFailure(text('  {"success": false, "error": "MCPError: no such actor"}'))).toBeNull();
    expect(handlerFailure(text('{"success": false}'), { fromText: false })).toBeNull();
    const file = { content: [{ type: 'text' as const, text: 'log line' }, { type: 'text' as const, text: '{"success":false,"reason":"partial"}' }] };
    expect(handlerFailure(file)).toBeNull();
  });

  it('with fromText, a text block that parses as a JSON object with success: false is a failure', () => {
    expect(handlerFailure(text('  {"success": false, "error": "MCPError: no such actor"}'), { fromText: true })).toBe('MCPError: no such actor');
  });

  it('only an explicit boolean false counts', () => {
    for (const v of [0, 'false', null, undefined, true]) {
      expect(handlerFailure(text('x', { structuredContent: { success: v } }))).toBeNull();
      expect(handlerFailure(text(JSON.stringify({ success: v })), { fromText: true })).toBeNull();
    }
  });

  it('an answer with no success key is an ordinary answer (a listing, a dump)', () => {
    expect(handlerFailure(text('{"items": [1, 2]}', { structuredContent: { items: [1, 2] } }))).toBeNull();
  });

  it('a success nested in arrays or items is that item\'s verdict, not the call\'s', () => {
    const batch = { success: true, results: [{ id: 1, success: false, error: 'locked' }, { id: 2, success: true }] };
    expect(handlerFailure(text(JSON.stringify(batch), { structuredContent: batch }))).toBeNull();
    expect(handlerFailure(text(JSON.stringify([{ success: false }])), { fromText: true })).toBeNull();
    expect(handlerFailure(text('x', { structuredContent: { data: { success: false } } }))).toBeNull();
  });

  it('text that is not JSON, or JSON that is not an object, is not a verdict', () => {
    for (const t of ['{"success": false', 'success: false', 'false']) expect(handlerFailure(text(t), { fromText: true })).toBeNull();
  });

  it('with fromText, a failure in a later text block counts; the body is not touched', () => {
    const result = { content: [{ type: 'text' as const, text: 'log line' }, { type: 'text' as const, text: '{"success":false,"reason":"partial"}' }] };
    const copy = JSON.parse(JSON.stringify(result));
    expect(handlerFailure(result, { fromText: true })).toBe('partial');
    expect(result).toEqual(copy);
  });
});
