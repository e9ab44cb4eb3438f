/** `responseResult` (upstream/rest/response.ts): a body cut at `maxResponseBytes`, scrubbed whole, shows nothing from past the cut. */
import { describe, expect, it } from 'vitest';
import { responseResult, secretMask } from '../../src/upstream/rest/response.js';
import { REDACTED, Scrubber } from '../../src/shared/scrub.js';

const scrubber = new Scrubber();

function cutText(text: string, maxBytes: number): string {
  const result = responseResult(
    { status: 200, statusText: 'OK', contentType: 'text/plain', body: { bytes: Buffer.from(text), truncated: true }, maxBytes },
    secretMask([]),
    (t) => scrubber.text(t),
  );
  return (result.content[0] as { text: string }).text.split('\n[body cut')[0]!;
}

describe('a cut REST body', () => {
  it('shows nothing from past the cut when a redaction before it shortened the text (regression: margin text was shown, 420 bytes for 200)', () => {
    const head = 'password=' + 'S'.repeat(120) + ' ';
    const body = head + 'a'.repeat(200 - head.length);
    for (const margin of ['MARGIN-'.repeat(30) + ' token=' + 'T'.repeat(30) + ' ' + 'z'.repeat(100), '界'.repeat(200) + ' token=' + 'T'.repeat(30)]) {
      const shown = cutText(body + margin, 200);
      expect(shown).toBe(`password=${REDACTED} ${'a'.repeat(200 - head.length)}`);
      expect(Buffer.byteLength(shown)).toBeLessThanOrEqual(200);
    }
  });

  it('shows a secret the cut runs through as its marker, never its first characters', () => {
    const token = 'ghp_' + 'Q7'.repeat(20);
    const shown = cutText('x'.repeat(190) + ' ' + token + ' and more', 200);
    expect(shown).toBe(`${'x'.repeat(190)} ${REDACTED}`);
  });

  it('is the first maxResponseBytes as they are when nothing near the cut is secret', () => {
    expect(cutText('y'.repeat(300) + ' password=hunter2hunter2', 200)).toBe('y'.repeat(200));
  });
});
