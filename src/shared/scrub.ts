/**
 * Secret scrubbing (seed 002_7bce204a86c1c7ba.txt, step 8 "Post"; issue 3 §6).
 *
 * Three kinds of secret become {@link REDACTED}:
 *  1. exact values injected into an upstream (its configured `env` and `headers`, `${env:…}`
 *     values, principal tokens), registered with {@link Scrubber.addSecrets}; also in their
 *     JSON-escaped and URL-encoded spellings. These go first, in a pass of their own, so no
 *     other pattern can consume part of one and leave the rest;
 *  2. values of credential-named fields (`password`, `token`, `secret`, `api_key`,
 *     `authorization`, `cookie`, …): object fields (a credential-named object or array has every
 *     string inside redacted), `"name": "value"` and `"name": [flat array]` in JSON text (not the
 *     bare `pin` and `pwd`: an anchor that short wakes the patterns in every "mapping"), `name=value` / `name: value` in
 *     plain text (quoted or not, with an optional `Bearer`/`Basic` scheme), and the password of
 *     `scheme://user:password@host`;
 *  3. value shapes: AWS access keys, GitHub, GitLab, Slack, npm, Hugging Face, Google and Stripe
 *     tokens, JWTs, PEM private keys, `Bearer …`, and common API-key prefixes (`sk-`, `sk_live_`,
 *     `xoxb-`, `AIza`, …).
 *
 * Counts are not secrets: a number is redacted only under a password-like name, so
 * `max_tokens: 100` survives. Object keys are scrubbed too. Nesting deeper than
 * {@link MAX_DEPTH} is replaced whole (fail closed). The same scrubber covers results, records
 * and every log line, and everything else an upstream sends toward a client (lists, progress,
 * relayed logs, replies, errors: `upstream/upstream-scrub.ts`), where {@link Scrubber.strings}
 * serves JSON Schemas and {@link Scrubber.media} content with binary parts.
 */
import { AnchorScanner, replaceAtStarts, type Anchor, type AnchorLead } from './scrub-scan.js';

export const REDACTED = '[REDACTED]';

/** Strict UTF-8: a blob that is not valid UTF-8 is binary. */
const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** Deepest nesting walked; anything deeper is replaced by {@link REDACTED}. */
export const MAX_DEPTH = 256;
/** Shortest exact secret registered; shorter values would shred ordinary text. */
export const MIN_SECRET_LENGTH = 4;

/** Field names whose values are secret (matched case-insensitively, with `-`, `_` and spaces removed). */
export const CREDENTIAL_FIELD =
  /^(?:.*(?:password|passwd|passphrase|passcode|secret|token|apikey|accesskey|privatekey|clientsecret|authorization|cookie|credential|sessionid|signature)s?|auth|pwd|pin)$/i;

/** Field names whose values are secret even when they are numbers. */
const NUMERIC_SECRET_FIELD = /^(?:.*(?:password|passwd|passphrase|passcode|secret)s?|pwd|pin)$/i;

/** A count written as a string (`"max_tokens": "1000"`, `MAX_TOKENS=1000`): no secret unless the name is password-like. */
function isPlainCount(key: string, value: string): boolean {
  return /^-?\d+(?:\.\d+)?$/.test(value) && !NUMERIC_SECRET_FIELD.test(normalise(key));
}

/** Case-insensitive spelling of a lowercase word, `_` standing for an optional `_` or `-`. */
function ci(word: string): string {
  return word.replace(/[a-z_]/g, (c) => (c === '_' ? '[_-]?' : `[${c}${c.toUpperCase()}]`));
}

const PASSWORD_WORDS = ['password', 'passwd', 'passphrase', 'passcode', 'secret', 'client_secret', 'private_key'];
const TOKEN_WORDS = ['token', 'api_key', 'access_key', 'authorization', 'cookie', 'credential', 'session_id', 'signature'];
/** Names whose value is secret whatever it looks like. */
const PASSWORD_NAMES = PASSWORD_WORDS.map(ci).join('|');
/** Names whose value is secret unless it is a plain number (`max_tokens=100`). */
const TOKEN_NAMES = TOKEN_WORDS.map(ci).join('|');
const NAME_PREFIX = String.raw`[A-Za-z0-9_-]*?`;
const PLURAL = '[sS]?';
const SCHEME = String.raw`(?:(?:${ci('bearer')}|${ci('basic')}|${ci('token')}|${ci('digest')})\s+)?`;
/**
 * A password-like key in JSON text: `"db_password"`, `"secrets"`. Not the bare `"pin"` and
 * `"pwd"` the structured scrubber knows: as anchors (scrub-scan.ts) three letters found in
 * "mapping" or "shipping" would wake the patterns in most prose and cost large texts their
 * byte-level pass (`leavesJsonString`), and a quoted anchor would do the same to every text with
 * an escaped quote.
 */
const PASSWORD_KEY = String.raw`"${NAME_PREFIX}(?:${PASSWORD_NAMES})${PLURAL}"`;
/** A token-like key in JSON text: `"api_key"`, `"X-Api-Key"`, `"tokens"`. */
const TOKEN_KEY = String.raw`"${NAME_PREFIX}(?:${TOKEN_NAMES})${PLURAL}"`;
const JSON_STRING = String.raw`"(?:[^"\\]|\\.)*"`;
const JSON_NUMBER = String.raw`-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?`;
const JSON_SCALAR = String.raw`(?:${JSON_STRING}|${JSON_NUMBER}|true|false|null)`;
/**
 * A JSON array of scalars (`[123456]`, `["a", "b"]`); nested arrays and objects are not read.
 * No two `\s*` can take the same spaces (the trailing one is inside the group): linear on a `[`
 * followed by a long run of spaces and no `]`.
 */
const JSON_FLAT_ARRAY = String.raw`\[\s*(?:${JSON_SCALAR}(?:\s*,\s*${JSON_SCALAR})*\s*)?\]`;
const PLAIN_VALUE = String.raw`(?!\[REDACTED\])${SCHEME}(?:"[^"\n]*"|'[^'\n]*'|[^\s"',;&<>]{4,})`;
const VALUE_END = String.raw`(?:[\s"',;&<>]|$)`;

/** Text patterns; each named group is the kept prefix of a credential-named field. */
const FIELD_PATTERNS: readonly string[] = [
  // "password": "value" in JSON text
  String.raw`(?<jf>${PASSWORD_KEY}\s*:\s*)"(?:[^"\\]|\\.)*"`,
  // "api_key": "value" in JSON text; not "max_tokens": "1000" (a count)
  String.raw`(?<jt>${TOKEN_KEY}\s*:\s*)(?!"-?\d+(?:\.\d+)?")"(?:[^"\\]|\\.)*"`,
  // "password": 123456 in JSON text
  String.raw`(?<jn>${PASSWORD_KEY}\s*:\s*)-?\d+(?:\.\d+)?`,
  // "password": [123456, "value"] in JSON text: every string and number in it
  String.raw`(?<ja>${PASSWORD_KEY}\s*:\s*)${JSON_FLAT_ARRAY}`,
  // "api_keys": ["value", 42] in JSON text: every string in it; numbers are counts
  String.raw`(?<jta>${TOKEN_KEY}\s*:\s*)${JSON_FLAT_ARRAY}`,
  // password=value, password: "value"
  String.raw`\b(?<pp>${NAME_PREFIX}(?:${PASSWORD_NAMES})${PLURAL}\s*[=:]\s*)${PLAIN_VALUE}`,
  // token=value, Authorization: Bearer value; not token=123 (a count)
  String.raw`\b(?<pt>${NAME_PREFIX}(?:${TOKEN_NAMES})${PLURAL}\s*[=:]\s*)(?!\d+${VALUE_END})${PLAIN_VALUE}`,
];

/**
 * Value shapes, each with the literals every one of its matches starts with (its anchors for
 * the one-pass scan, `scrub-scan.ts`; matched as written). A new shape needs its anchors.
 */
const SHAPES: ReadonlyArray<{ readonly pattern: string; readonly anchors: readonly string[]; readonly lead?: AnchorLead }> = [
  // PEM private keys, whole block: what can be its body (base64, header lines, line breaks and
  // JSON's escaped ones), then its END line when there is one. A key cut before its END line (the
  // head of a file, a page of it) is taken to the end of that body. One walk, never backtracked:
  // a lazy scan for the END line went to the end of the text from every BEGIN without one
  // (quadratic: 464 KB of such lines held the event loop 2.8 s).
  { pattern: String.raw`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:[A-Za-z0-9+/=\s\\,:]|-(?!----END ))*(?:-----END [A-Z0-9 ]*PRIVATE KEY-----)?`, anchors: ['-----BEGIN '] },
  // the password of scheme://user:password@host (the match starts after `://user:`)
  { pattern: String.raw`(?<=\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/:@]+:)[^\s/@]+(?=@)`, anchors: ['://'], lead: 'url' },
  // AWS access key ids
  { pattern: String.raw`\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b`, anchors: ['AKIA', 'ASIA', 'ABIA', 'ACCA'] },
  // GitHub tokens
  { pattern: String.raw`\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b`, anchors: ['ghp_', 'gho_', 'ghu_', 'ghs_', 'ghr_', 'github_pat_'] },
  // Slack tokens and webhooks
  { pattern: String.raw`\bxox[abposre]-[A-Za-z0-9-]{10,}`, anchors: ['xox'] },
  { pattern: String.raw`\bxapp-[A-Za-z0-9-]{10,}`, anchors: ['xapp-'] },
  { pattern: String.raw`https://hooks\.slack\.com/services/[A-Za-z0-9/_-]+`, anchors: ['https://hooks.slack.com/services/'] },
  // JWTs
  { pattern: String.raw`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`, anchors: ['eyJ'] },
  // Bearer / Basic credentials
  { pattern: String.raw`\bBearer\s+[A-Za-z0-9._~+/=-]{8,}`, anchors: ['Bearer'] },
  // Basic / Token only with an upper-case letter, digit, + / or = past its first character, so
  // prose ("Basic information about …", "Token limits") survives; base64 credentials have one.
  { pattern: String.raw`\b(?:Basic|Token)\s+(?=[A-Za-z0-9._~+/=-][a-z._~-]*[A-Z0-9+/=])[A-Za-z0-9._~+/=-]{8,}`, anchors: ['Basic', 'Token'] },
  // common API-key prefixes: OpenAI/Anthropic, Stripe, Google, SendGrid, npm, GitLab, Twilio, Hugging Face
  { pattern: String.raw`\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}`, anchors: ['sk-'] },
  { pattern: String.raw`\b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{10,}`, anchors: ['sk_live_', 'sk_test_', 'pk_live_', 'pk_test_', 'rk_live_', 'rk_test_'] },
  { pattern: String.raw`\bwhsec_[A-Za-z0-9]{20,}`, anchors: ['whsec_'] },
  { pattern: String.raw`\bAIza[0-9A-Za-z_-]{35}`, anchors: ['AIza'] },
  { pattern: String.raw`\bya29\.[0-9A-Za-z_-]{20,}`, anchors: ['ya29.'] },
  { pattern: String.raw`\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}`, anchors: ['SG.'] },
  { pattern: String.raw`\bnpm_[A-Za-z0-9]{36}\b`, anchors: ['npm_'] },
  { pattern: String.raw`\bglpat-[A-Za-z0-9_-]{20,}`, anchors: ['glpat-'] },
  { pattern: String.raw`\bhf_[A-Za-z0-9]{30,}`, anchors: ['hf_'] },
  { pattern: String.raw`\bSK[0-9a-fA-F]{32}\b`, anchors: ['SK'] },
];

/** One regular expression for every field pattern and shape, compiled once. */
export const PATTERN = new RegExp([...FIELD_PATTERNS, ...SHAPES.map((s) => `(?:${s.pattern})`)].join('|'), 'g');
/** {@link PATTERN}, tried at one position at a time. */
const PATTERN_AT = new RegExp(PATTERN.source, 'y');

/** Spellings of a word as `ci` matches it: `_` standing for `_`, `-` or nothing. */
function spellings(word: string): string[] {
  return word.includes('_') ? ['_', '-', ''].map((sep) => word.replaceAll('_', sep)) : [word];
}

/**
 * Every match of {@link PATTERN} contains one of these: a credential name (any case, any
 * prefix; every field pattern names one) or a shape's anchor.
 */
export const PATTERN_ANCHORS: readonly Anchor[] = [
  ...[...PASSWORD_WORDS, ...TOKEN_WORDS].flatMap(spellings).map((text) => ({ text, lead: 'name' as const })),
  ...SHAPES.flatMap((s) => s.anchors.map((text) => ({ text, lead: s.lead ?? ('none' as const), caseSensitive: true }))),
];
const PATTERN_SCANNER = new AnchorScanner(PATTERN_ANCHORS);

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** The replacement of one {@link PATTERN} match: a field keeps its name, anything else becomes {@link REDACTED}. */
export function redact(match: string, groups: Record<string, string | undefined>): string {
  if (groups.jf !== undefined) return `${groups.jf}"${REDACTED}"`;
  if (groups.jt !== undefined) return `${groups.jt}"${REDACTED}"`;
  if (groups.jn !== undefined) return `${groups.jn}"${REDACTED}"`;
  if (groups.ja !== undefined) return groups.ja + redactElements(match.slice(groups.ja.length), true);
  if (groups.jta !== undefined) return groups.jta + redactElements(match.slice(groups.jta.length), false);
  const prefix = groups.pp ?? groups.pt;
  if (prefix !== undefined) return `${prefix}${REDACTED}`;
  return match === REDACTED ? match : REDACTED;
}

/**
 * The part `[head, tail)` of a {@link PATTERN} match (`redact` changing it) that holds the secret:
 * a field's value (inside its quotes for a JSON string), from a JSON array's first redacted
 * element to its last, a shape whole. Told from the match's groups, not by comparing the match
 * with its replacement: a value's own first or last characters that happen to equal those of
 * `[REDACTED]` (`password=[x]`, `"token": "[REDACTED]x"`, `https://u:[pw]@h`) are the secret's too.
 */
function redactedPart(match: string, groups: Record<string, string | undefined>): [number, number] {
  const json = groups.jf ?? groups.jt;
  if (json !== undefined) return [json.length + 1, match.length - 1];
  const plain = groups.jn ?? groups.pp ?? groups.pt;
  if (plain !== undefined) return [plain.length, match.length];
  const array = groups.ja ?? groups.jta;
  if (array === undefined) return [0, match.length];
  let head = match.length;
  let tail = 0;
  JSON_ELEMENT.lastIndex = array.length;
  for (let e = JSON_ELEMENT.exec(match); e; e = JSON_ELEMENT.exec(match)) {
    if (e[0] === '""' || (groups.ja === undefined && e[0][0] !== '"')) continue;
    head = Math.min(head, e.index);
    tail = e.index + e[0].length;
  }
  return [head, tail];
}

/** A string or number of a JSON array written as text. */
const JSON_ELEMENT = new RegExp(`${JSON_STRING}|${JSON_NUMBER}`, 'g');

/**
 * A flat JSON array written as text with every non-empty string in it redacted, and with
 * `numbers` every number too (as {@link Scrubber.value} does inside a credential-named array).
 */
function redactElements(array: string, numbers: boolean): string {
  return array.replace(JSON_ELEMENT, (element) => (element === '""' || (!numbers && element[0] !== '"') ? element : `"${REDACTED}"`));
}

/**
 * `[start, end)` ranges sorted, with those that overlap or touch merged and empty ones dropped
 * ({@link Scrubber.redactions}' answer). Sorts `ranges` in place and may change its pairs.
 */
export function mergedRanges(ranges: Array<[number, number]>): Array<[number, number]> {
  ranges.sort((a, b) => a[0] - b[0]);
  const merged: Array<[number, number]> = [];
  for (const [from, to] of ranges) {
    const last = merged[merged.length - 1];
    if (last && from <= last[1]) last[1] = Math.max(last[1], to);
    else if (to > from) merged.push([from, to]);
  }
  return merged;
}

/** Scrubs text and JSON values; one instance per gateway, shared by results, records and logs. */
export class Scrubber {
  private readonly secrets = new Set<string>();
  /** The exact secrets (every spelling), longest first; undefined when there are none. */
  private exact: RegExp | undefined;
  /** {@link PATTERN_ANCHORS} plus the spellings of {@link exact} (flagged), found in one pass. */
  private scanner: AnchorScanner = PATTERN_SCANNER;
  /** Every spelling of the exact secrets ({@link secretSpellings}), for {@link cutText}. */
  private spellings: readonly string[] = [];
  /** The length of the longest of {@link spellings}; 0 when there are none. */
  private longestSpelling = 0;
  private secretsAdded = 0;

  constructor(secrets: Iterable<string> = []) {
    for (const s of secrets) this.addOne(s);
    this.exact = this.compile();
  }

  /**
   * Registers exact secret values (configured `env` values, header values). Values shorter
   * than {@link MIN_SECRET_LENGTH} characters are ignored: redacting them would shred text.
   */
  addSecrets(values: Iterable<string>): void {
    let changed = false;
    for (const v of values) changed = this.addOne(v) || changed;
    if (changed) {
      this.exact = this.compile();
      this.secretsAdded++;
    }
  }

  /**
   * How many times {@link addSecrets} added a secret: what was scrubbed before it changed may
   * hold the new one (a cache of scrubbed values keys on this).
   */
  get generation(): number {
    return this.secretsAdded;
  }

  /**
   * Whether {@link text} would certainly return a JSON string's text as it is, told from the
   * string's bytes as written without decoding it (`bytes` between its quotes, `escaped` the ASCII
   * characters its escapes stand for: wire/raw-json.ts `RawJsonString`). False means undecided:
   * read the text and scrub it. Issue 19: an 8 MiB text block is told clean in one walk of its
   * bytes, never decoded (`AnchorScanner.mayOccurInJsonString`).
   */
  leavesJsonString(bytes: Uint8Array, escaped: Uint8Array): boolean {
    return !this.scanner.mayOccurInJsonString(bytes, escaped);
  }

  /** Whether `text` holds anything this scrubber would redact. */
  has(text: string): boolean {
    return this.text(text) !== text;
  }

  /** `text` with every secret replaced by {@link REDACTED}. Returns the same string when nothing matched. */
  text(text: string): string {
    if (text.length < MIN_SECRET_LENGTH) return text;
    let out = text;
    // One pass finds every place a secret can be (scrub-scan.ts); the patterns run only there.
    let { starts, flagged } = this.scanner.starts(out);
    if (flagged && this.exact) {
      this.exact.lastIndex = 0;
      out = out.replace(this.exact, REDACTED);
      if (out !== text) ({ starts } = PATTERN_SCANNER.starts(out));
    }
    const scrubbed = starts.length ? replaceAtStarts(out, PATTERN_AT, starts, redact) : out;
    // Equal text is returned as the original string, so callers can compare by reference.
    return scrubbed === text ? text : scrubbed;
  }

  /**
   * Where in `text` {@link text} would redact: sorted, disjoint `[start, end)` ranges in UTF-16
   * code units of `text` itself (not of the scrubbed text), merged where they touch. An exact
   * secret's range is the whole secret; a pattern's is the part its replacement changes (a
   * field's value, not its name; for a JSON array written as text, from its first redacted
   * element to its last). For text shown in pieces whose bounds a reader chooses (an estate
   * file read from any offset): a piece masked by these ranges, found in a window around it,
   * shows no part of a secret that lies whole in that window. Empty when nothing would change.
   */
  redactions(text: string): Array<[number, number]> {
    if (text.length < MIN_SECRET_LENGTH) return [];
    const ranges: Array<[number, number]> = [];
    let { starts, flagged } = this.scanner.starts(text);
    let out = text;
    /** The exact secrets' replacements in `out`: where each starts there, and its `[start, end)` in `text`. */
    const swaps: Array<{ at: number; from: number; to: number }> = [];
    if (flagged && this.exact) {
      const exact = new RegExp(this.exact.source, 'g');
      let copied = 0;
      let built = '';
      for (let m = exact.exec(text); m; m = exact.exec(text)) {
        const from = m.index;
        const to = from + m[0].length;
        built += text.slice(copied, from);
        swaps.push({ at: built.length, from, to });
        built += REDACTED;
        copied = to;
        ranges.push([from, to]);
      }
      if (swaps.length) {
        out = built + text.slice(copied);
        ({ starts } = PATTERN_SCANNER.starts(out));
      }
    }
    /**
     * A place in `out` as a place in `text`: inside a replacement, its start (`side` 0) or its end
     * (1). Asked in increasing order (the matches come in order), so the replacements are walked once.
     */
    let passed = 0;
    let shift = 0;
    const inText = (at: number, side: 0 | 1): number => {
      while (passed < swaps.length && swaps[passed]!.at + REDACTED.length <= at) {
        const swap = swaps[passed++]!;
        shift += swap.to - swap.from - REDACTED.length;
      }
      const swap = swaps[passed];
      if (swap && at > swap.at && at < swap.at + REDACTED.length) return side === 0 ? swap.from : swap.to;
      return at + shift;
    };
    let end = 0;
    for (const at of starts) {
      if (at < end) continue;
      PATTERN_AT.lastIndex = at;
      const m = PATTERN_AT.exec(out);
      if (!m) continue;
      end = at + m[0].length;
      const groups = m.groups ?? {};
      if (redact(m[0], groups) === m[0]) continue;
      const [head, tail] = redactedPart(m[0], groups);
      if (head < tail) ranges.push([inText(at + head, 0), inText(at + tail, 1)]);
    }
    return mergedRanges(ranges);
  }

  /**
   * The length in UTF-16 code units of the longest spelling of an exact secret; 0 with none. A
   * window around a piece of text needs at least this much on each side for {@link redactions}
   * to see every exact secret that reaches into the piece.
   */
  get longestSecret(): number {
    return this.longestSpelling;
  }

  /**
   * {@link text} for text that was cut before this scrub (each cut marked by `marker`, default
   * `…`: shared/cut.ts): the first characters of an exact secret that ran across a cut stand
   * before its marker, the rest cut away, and {@link text} cannot recognise them; they are
   * dropped too. For text kept cut and shown again later, when a secret may have been added since
   * (an upstream's last error on the status page, kept before a config reload). Text scrubbed
   * before it was cut needs none of this for the secrets known then. The same string when
   * nothing changed.
   */
  cutText(text: string, marker = '…'): string {
    const scrubbed = this.text(text);
    if (this.spellings.length === 0 || !scrubbed.includes(marker)) return scrubbed;
    const out = scrubbed
      .split(marker)
      .map((part, i, parts) => (i < parts.length - 1 ? this.withoutSecretStart(part) : part))
      .join(marker);
    return out === text ? text : out;
  }

  /**
   * {@link text} for text cut once at its end and marked by `marker` there (a record's `name`,
   * `subject` and `reason`, shown again later): with any exact secret known, the characters before
   * that mark are dropped up to one fewer than the longest secret spelling, whatever they are, so
   * the start of a secret added since that ran across the cut never shows. Never fewer for a match
   * and never more for one: what is dropped does not depend on the text (unlike {@link cutText},
   * whose dropped characters would tell a reader of their own text, one character at a time,
   * which of them start a secret). A `marker` inside the text is text. The same string when
   * nothing changed.
   */
  cutEndText(text: string, marker: string): string {
    const scrubbed = this.text(text);
    if (this.longestSpelling === 0 || !scrubbed.endsWith(marker)) return scrubbed;
    const before = scrubbed.length - marker.length;
    const out = `${scrubbed.slice(0, Math.max(0, before - (this.longestSpelling - 1)))}${marker}`;
    return out === text ? text : out;
  }

  /** `before` without the longest start of any secret spelling it ends with (a whole one is redacted already). */
  private withoutSecretStart(before: string): string {
    let head = 0;
    for (const spelling of this.spellings) {
      for (let k = Math.min(spelling.length - 1, before.length); k > head; k--) {
        if (before.endsWith(spelling.slice(0, k))) {
          head = k;
          break;
        }
      }
    }
    return head > 0 ? before.slice(0, before.length - head) : before;
  }

  /**
   * A scrubbed copy of any JSON value: strings scrubbed, keys scrubbed, credential-named fields
   * redacted. Returns the original object (same reference) when nothing needed changing, so
   * callers can skip re-serialising. Never modifies its input.
   */
  value<T>(value: T): T {
    return this.walk(value, 0, false) as T;
  }

  /**
   * {@link value} for MCP content that can carry binary data (resource contents, prompt
   * messages): a `blob` string is {@link blob}-scrubbed, and the base64 `data` of an `image` or
   * `audio` block is left as it is (text patterns run over base64 would corrupt it, and it holds
   * no text). Everything else as {@link value}. The same reference when nothing changed.
   */
  media<T>(value: T): T {
    return this.walk(value, 0, false, true) as T;
  }

  /**
   * A base64 `blob` with its secrets redacted: when it decodes to UTF-8 text, that text is
   * scrubbed with {@link text} and re-encoded; binary content (not valid UTF-8) is returned as
   * it is. The same string when nothing changed.
   */
  blob(base64: string): string {
    if (base64.length < MIN_SECRET_LENGTH) return base64;
    const bytes = Buffer.from(base64, 'base64');
    let decoded: string;
    try {
      decoded = UTF8.decode(bytes);
    } catch {
      return base64;
    }
    const scrubbed = this.text(decoded);
    return scrubbed === decoded ? base64 : Buffer.from(scrubbed, 'utf8').toString('base64');
  }

  /**
   * Every string of a JSON value, keys included, through {@link text}, with no field-name rule:
   * for definitions (a tool's `inputSchema`), where a property called `password` names a
   * parameter, not a secret, and its `"type": "string"` must survive. Nesting deeper than
   * {@link MAX_DEPTH} is replaced whole. The same reference when nothing changed.
   */
  strings<T>(value: T): T {
    return this.walkStrings(value, 0) as T;
  }

  /**
   * {@link strings} for a message scrubbed once already and sent again later (a resumed stream's
   * events), when a secret may have been added since: every string and key through {@link text},
   * no field-name rule (what it redacted then is redacted still; a schema's `password` property
   * and a `progressToken` survive), and binary parts as {@link media} treats them (a `blob`
   * {@link blob}-scrubbed, an image's or audio's `data` left as it is) when they are base64: one
   * that is not is text (the message may have been scrubbed by {@link value}, as a tool's
   * `structuredContent` is, which reads no field as binary). The same reference when nothing
   * changed.
   */
  mediaStrings<T>(value: T): T {
    return this.walkStrings(value, 0, true) as T;
  }

  /**
   * A base64 `data:` URI of a textual type (`data:image/svg+xml;base64,…`: a tool's icon) with its
   * decoded text scrubbed, re-encoded when that changed it; any other string through {@link text}.
   */
  private textOrDataUri(value: string): string {
    // `data:` in any case (a scheme is case-insensitive); its head looked at in the first 256 characters only.
    const c = value.charCodeAt(0);
    if ((c !== 0x64 && c !== 0x44) || value.length < 6 || value.slice(0, 5).toLowerCase() !== 'data:') return this.text(value);
    const head = DATA_URI_BASE64.exec(value.slice(0, DATA_URI_HEAD_MAX));
    if (!head || !isTextualMedia(head[1]!)) return this.text(value);
    const body = value.slice(head[0].length);
    const scrubbed = this.blob(body);
    return this.text(scrubbed === body ? value : head[0] + scrubbed);
  }

  private walkStrings(value: unknown, depth: number, media = false): unknown {
    if (typeof value === 'string') return this.textOrDataUri(value);
    if (value === null || typeof value !== 'object') return value;
    if (depth >= MAX_DEPTH) return REDACTED;
    if (Array.isArray(value)) {
      let out: unknown[] | undefined;
      for (let i = 0; i < value.length; i++) {
        const next = this.walkStrings(value[i], depth + 1, media);
        if (next !== value[i]) (out ??= value.slice())[i] = next;
      }
      return out ?? value;
    }
    let out: Record<string, unknown> | undefined;
    const source = value as Record<string, unknown>;
    for (const key of Object.keys(source)) {
      const current = source[key];
      // Only base64 is binary here: the message may have been scrubbed by value() (a tool's
      // structuredContent), which took a `blob` or an image's `data` of any other text as text.
      const next = media && typeof current === 'string' && isBinaryField(source, key) && isBase64(current) ? this.binary(source, key, current) : this.walkStrings(current, depth + 1, media);
      out = this.put(out, source, key, next);
    }
    return out ?? value;
  }

  /** A `blob`, or an image's or audio's `data` (`isBinaryField`), as {@link media} scrubs it: decoded text scrubbed, binary left alone. */
  private binary(source: Record<string, unknown>, key: string, current: string): string {
    return key === 'blob' || (typeof source.mimeType === 'string' && isTextualMedia(source.mimeType)) ? this.blob(current) : current;
  }

  /** `out` (a copy of `source`, made on the first change) with `key` scrubbed and set to `next`. */
  private put(out: Record<string, unknown> | undefined, source: Record<string, unknown>, key: string, next: unknown): Record<string, unknown> | undefined {
    const cleanKey = this.text(key);
    if (cleanKey !== key) {
      out ??= { ...source };
      delete out[key];
      out[cleanKey] = next;
    } else if (next !== source[key]) {
      (out ??= { ...source })[key] = next;
    }
    return out;
  }

  /**
   * `secretScope`: inside a credential-named field (every string redacted); `numberScope`: inside a
   * password-like one (every number redacted too: a PIN in `{"pin": [1234]}` is as secret as in `{"pin": 1234}`).
   */
  private walk(value: unknown, depth: number, secretScope: boolean, media = false, numberScope = false): unknown {
    if (typeof value === 'string') return secretScope && value !== '' ? REDACTED : this.textOrDataUri(value);
    if (typeof value === 'number') return numberScope ? REDACTED : value;
    if (value === null || typeof value !== 'object') return value;
    if (depth >= MAX_DEPTH) return REDACTED;
    if (value instanceof Error) {
      return { type: value.name, message: this.text(value.message), stack: value.stack === undefined ? undefined : this.text(value.stack) };
    }
    if (Array.isArray(value)) {
      let out: unknown[] | undefined;
      for (let i = 0; i < value.length; i++) {
        const next = this.walk(value[i], depth + 1, secretScope, media, numberScope);
        if (next !== value[i]) (out ??= value.slice())[i] = next;
      }
      return out ?? value;
    }
    let out: Record<string, unknown> | undefined;
    const source = value as Record<string, unknown>;
    const keys = Object.keys(source);
    for (const key of keys) {
      const current = source[key];
      const credential = secretScope || isCredentialField(key);
      const numbers = numberScope || (credential && NUMERIC_SECRET_FIELD.test(normalise(key)));
      let next: unknown;
      if (media && !credential && typeof current === 'string' && isBinaryField(source, key)) {
        // Image and audio data are binary, left alone, but for a textual type (an SVG is XML text).
        next = this.binary(source, key, current);
      } else if (credential && typeof current === 'string') {
        next = current === '' || (!secretScope && isPlainCount(key, current)) ? current : REDACTED;
      }
      else if (typeof current === 'number') next = numbers ? REDACTED : current;
      else next = this.walk(current, depth + 1, credential, media, numbers);
      out = this.put(out, source, key, next);
    }
    return out ?? value;
  }

  private addOne(value: string): boolean {
    if (typeof value !== 'string' || value.length < MIN_SECRET_LENGTH || this.secrets.has(value)) return false;
    this.secrets.add(value);
    return true;
  }

  private compile(): RegExp | undefined {
    const spellings = new Set<string>();
    for (const s of this.secrets) for (const spelling of secretSpellings(s)) if (spelling.length >= MIN_SECRET_LENGTH) spellings.add(spelling);
    this.spellings = [...spellings];
    this.longestSpelling = this.spellings.reduce((n, spelling) => Math.max(n, spelling.length), 0);
    if (!spellings.size) return undefined;
    this.scanner = new AnchorScanner([...PATTERN_ANCHORS, ...[...spellings].map((text) => ({ text, lead: 'flag' as const, caseSensitive: true }))]);
    const parts = [...spellings].sort((a, b) => b.length - a.length).map(escapeRegExp);
    return new RegExp(parts.join('|'), 'g');
  }
}

/**
 * Whether `value` is standard base64 (RFC 4648 §4: its alphabet, `=` padding only at the end, a
 * length that is a multiple of 4; line breaks ignored). Node's decoder takes any text, skipping
 * what is not base64, so prose with a secret in it would pass for binary data.
 */
function isBase64(value: string): boolean {
  const body = value.includes('\n') ? value.replace(/\r?\n/g, '') : value;
  return body.length % 4 === 0 && BASE64.test(body);
}

/** Standard base64 text without line breaks ({@link isBase64}). */
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Whether `source[key]` is base64 content of MCP media: a `blob`, or the `data` of an `image` or `audio` block. */
function isBinaryField(source: Record<string, unknown>, key: string): boolean {
  return key === 'blob' || (key === 'data' && (source.type === 'image' || source.type === 'audio'));
}

/** The head of a base64 `data:` URI (RFC 2397), its media type captured. */
const DATA_URI_BASE64 = /^data:([^;,]*)(?:;[^;,]*)*;base64,/i;
/** The longest head of a `data:` URI looked at (its media type and parameters), in characters. */
const DATA_URI_HEAD_MAX = 256;
/** Media types whose bytes are text: `text/*`, XML and JSON (`image/svg+xml`, `application/ld+json`). */
const TEXTUAL_MEDIA = /^(?:text\/[^;\s]*|[^;/\s]+\/(?:[^;\s]*\+)?(?:xml|json)|application\/(?:javascript|ecmascript))$/i;

/**
 * Whether media type `type` (parameters after `;` ignored) is one of {@link TEXTUAL_MEDIA}. Only
 * its first {@link DATA_URI_HEAD_MAX} characters are looked at, trimmed: the expression never
 * meets a long run of what it could match two ways (a type of 40,000 spaces took 1.3 s).
 */
function isTextualMedia(type: string): boolean {
  const bare = type.slice(0, DATA_URI_HEAD_MAX).split(';', 1)[0]!.trim();
  return bare.length > 0 && TEXTUAL_MEDIA.test(bare);
}

/** Characters JSON writers escape as `\uXXXX` besides control characters: every one past ASCII (Python's `ensure_ascii`, PHP), `<>&` (Go), `<>&'` (HTML-safe writers). */
const JSON_ESCAPE_SETS: readonly ((code: number) => boolean)[] = [
  (c) => c > 0x7e,
  (c) => c === 0x3c || c === 0x3e || c === 0x26,
  (c) => c > 0x7e || c === 0x3c || c === 0x3e || c === 0x26 || c === 0x27,
];

/**
 * The ways `secret` may be written in text an upstream sends: as it is; inside a JSON string as
 * `JSON.stringify` writes it, with `/` escaped as `\/` (PHP), and with the characters of each
 * {@link JSON_ESCAPE_SETS} escaped as `\uXXXX` in lower- or upper-case hex; and percent-encoded
 * (`encodeURIComponent`) in upper- or lower-case hex. A text that is itself JSON (a REST body
 * passed on as text, a tool's JSON in a text block) is scanned as it is, not decoded, so each
 * spelling must be known. Includes spellings shorter than a secret's minimum; callers filter.
 */
export function secretSpellings(secret: string): string[] {
  const out = new Set<string>([secret]);
  const json = JSON.stringify(secret).slice(1, -1);
  const jsons = [json];
  for (const escapes of JSON_ESCAPE_SETS) {
    let lower = '';
    let upper = '';
    for (const ch of json) {
      const code = ch.charCodeAt(0);
      // One code unit at a time: a character past the BMP is two escapes, as JSON writers do it.
      const units = ch.length === 1 ? [code] : [code, ch.charCodeAt(1)];
      if (!escapes(code)) {
        lower += ch;
        upper += ch;
        continue;
      }
      for (const u of units) {
        const hex = u.toString(16).padStart(4, '0');
        lower += `\\u${hex}`;
        upper += `\\u${hex.toUpperCase()}`;
      }
    }
    jsons.push(lower, upper);
  }
  for (const form of jsons) {
    out.add(form);
    if (form.includes('/')) out.add(form.replaceAll('/', '\\/'));
  }
  const url = encodeURIComponent(secret);
  out.add(url);
  out.add(url.replace(/%[0-9A-F]{2}/g, (e) => e.toLowerCase()));
  return [...out];
}

function normalise(name: string): string {
  return name.replace(/[-_\s]/g, '');
}

/** Whether a field name names a credential (`apiKey`, `X-Api-Key`, `client_secret`, `Cookie`, …). */
export function isCredentialField(name: string): boolean {
  // Field names are few and recur on every call (`text`, `type`, `content`…): remembered.
  let credential = credentialNames.get(name);
  if (credential === undefined) {
    credential = CREDENTIAL_FIELD.test(normalise(name));
    if (credentialNames.size >= CREDENTIAL_NAMES_KEPT) credentialNames.clear();
    credentialNames.set(name, credential);
  }
  return credential;
}

/** Field names already judged by {@link isCredentialField}, at most {@link CREDENTIAL_NAMES_KEPT}. */
const credentialNames = new Map<string, boolean>();
const CREDENTIAL_NAMES_KEPT = 4096;

/**
 * The literal values of a configured `env` or `headers` map to scrub by exact value (issues 3
 * §6 and 17 §9: only secrets are secrets). A value counts when its key names a credential
 * (`API_KEY`, `DB_PASSWORD`, `Authorization`, `X-Api-Key`: {@link isCredentialField}), unless
 * it is empty, a boolean, or a number under a name that is not password-like (`MAX_TOKENS`). Any other literal (`NODE_ENV: "production"`, `MODE: "fast"`) is an
 * ordinary setting and stays readable in every result; secret-shaped values are still caught by
 * the scrubber's patterns. Values that came from `${env:…}` are secrets whatever their key;
 * config loading adds those.
 */
export function credentialValues(entries: Readonly<Record<string, string>>): string[] {
  const out: string[] = [];
  for (const [key, raw] of Object.entries(entries)) {
    if (!isCredentialField(key)) continue;
    const value = raw.trim();
    if (value === '' || /^(?:true|false)$/i.test(value)) continue;
    if (isPlainCount(key, value)) continue;
    out.push(raw);
    // `Authorization: Bearer <token>`: the credential on its own is the secret too.
    const scheme = /^(?:Bearer|Basic|Token)\s+(\S{6,})$/i.exec(value);
    if (scheme) out.push(scheme[1]!);
  }
  return out;
}
