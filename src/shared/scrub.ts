/**
 * Secret scrubbing (seed 002_7bce204a86c1c7ba.txt, step 8 "Post"; issue 3 §6).
 *
 * Three kinds of secret become {@link REDACTED}:
 *  1. exact values injected into an upstream (its configured `env` and `headers`), registered
 *     with {@link Scrubber.addSecrets};
 *  2. values of credential-named fields (`password`, `token`, `secret`, `api_key`,
 *     `authorization`, `cookie`, …) in objects, and `"name": "value"` / `name=value` pairs in text;
 *  3. value shapes: AWS access keys, GitHub and Slack tokens, JWTs, PEM private keys,
 *     `Bearer …`, and common API-key prefixes (`sk-`, `sk_live_`, `xoxb-`, `AIza`, …).
 *
 * Text is scanned once by one combined regular expression; objects are walked once.
 * The same scrubber covers results, records and every log line.
 */
export const REDACTED = '[REDACTED]';

/** Field names whose values are always secret (matched case-insensitively, `-`/`_` ignored). */
export const CREDENTIAL_FIELD =
  /^(?:.*(?:password|passwd|passphrase|secret|token|apikey|accesskey|privatekey|clientsecret|authorization|cookie|credential|sessionid|signature)s?|auth|pwd|key)$/i;

const SHAPES: readonly string[] = [
  // PEM private keys, whole block
  String.raw`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----`,
  // AWS access key ids
  String.raw`\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b`,
  // GitHub tokens
  String.raw`\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b`,
  // Slack tokens and webhooks
  String.raw`\bxox[abposr]-[A-Za-z0-9-]{10,}\b`,
  String.raw`https://hooks\.slack\.com/services/[A-Za-z0-9/_-]+`,
  // JWTs
  String.raw`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`,
  // Bearer / Basic credentials
  String.raw`\b(?:Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=-]{8,}`,
  // common API-key prefixes: OpenAI/Anthropic, Stripe, Google, SendGrid, npm, GitLab, Twilio
  String.raw`\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}`,
  String.raw`\b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{10,}`,
  String.raw`\bAIza[0-9A-Za-z_-]{35}\b`,
  String.raw`\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}`,
  String.raw`\bnpm_[A-Za-z0-9]{36}\b`,
  String.raw`\bglpat-[A-Za-z0-9_-]{20,}`,
  String.raw`\bSK[0-9a-fA-F]{32}\b`,
];

// `"password": "value"` in JSON text, and `password=value` / `password: value` in plain text.
const FIELD_NAMES = String.raw`[A-Za-z_-]*(?:password|passwd|passphrase|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|client[_-]?secret|authorization|cookie|credential|session[_-]?id)s?`;
const JSON_FIELD = String.raw`("${FIELD_NAMES}"\s*:\s*)"(?:[^"\\]|\\.)*"`;
const PLAIN_FIELD = String.raw`\b(${FIELD_NAMES}\s*[=:]\s*)(?!\[REDACTED\])[^\s"',;&]{4,}`;

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Scrubs text and JSON values; one instance per gateway, shared by results, records and logs. */
export class Scrubber {
  private readonly secrets = new Set<string>();
  private pattern: RegExp;

  constructor(secrets: Iterable<string> = []) {
    for (const s of secrets) this.addOne(s);
    this.pattern = this.compile();
  }

  /**
   * Registers exact secret values (configured `env` values, header values). Values shorter
   * than 4 characters are ignored: redacting them would shred ordinary text.
   */
  addSecrets(values: Iterable<string>): void {
    let changed = false;
    for (const v of values) changed = this.addOne(v) || changed;
    if (changed) this.pattern = this.compile();
  }

  /** Whether `text` holds anything this scrubber would redact. */
  has(text: string): boolean {
    this.pattern.lastIndex = 0;
    return this.pattern.test(text);
  }

  /** `text` with every secret replaced by {@link REDACTED}. Returns the same string when nothing matched. */
  text(text: string): string {
    if (text.length === 0) return text;
    this.pattern.lastIndex = 0;
    return text.replace(this.pattern, (match, jsonPrefix?: string, plainPrefix?: string) => {
      if (jsonPrefix !== undefined) return `${jsonPrefix}"${REDACTED}"`;
      if (plainPrefix !== undefined) return `${plainPrefix}${REDACTED}`;
      return REDACTED;
    });
  }

  /**
   * A scrubbed copy of any JSON value: strings scrubbed, credential-named fields redacted.
   * Returns the original object (same reference) when nothing needed changing, so callers can
   * skip re-serialising.
   */
  value<T>(value: T): T {
    return this.walk(value, 0) as T;
  }

  private walk(value: unknown, depth: number): unknown {
    if (typeof value === 'string') return this.text(value);
    if (value === null || typeof value !== 'object' || depth > 64) return value;
    if (Array.isArray(value)) {
      let out: unknown[] | undefined;
      for (let i = 0; i < value.length; i++) {
        const next = this.walk(value[i], depth + 1);
        if (next !== value[i]) (out ??= value.slice())[i] = next;
      }
      return out ?? value;
    }
    let out: Record<string, unknown> | undefined;
    const source = value as Record<string, unknown>;
    for (const key of Object.keys(source)) {
      const current = source[key];
      let next: unknown;
      if (isCredentialField(key) && (typeof current === 'string' || typeof current === 'number') && current !== '') {
        next = REDACTED;
      } else {
        next = this.walk(current, depth + 1);
      }
      if (next !== current) (out ??= { ...source })[key] = next;
    }
    return out ?? value;
  }

  private addOne(value: string): boolean {
    if (typeof value !== 'string' || value.length < 4 || this.secrets.has(value)) return false;
    this.secrets.add(value);
    return true;
  }

  private compile(): RegExp {
    const exact = [...this.secrets].sort((a, b) => b.length - a.length).map(escapeRegExp);
    const parts = [JSON_FIELD, PLAIN_FIELD, ...exact, ...SHAPES.map((s) => `(?:${s})`)];
    return new RegExp(parts.join('|'), 'g');
  }
}

/** Whether a field name names a credential (`apiKey`, `X-Api-Key`, `client_secret`, `Cookie`, …). */
export function isCredentialField(name: string): boolean {
  return CREDENTIAL_FIELD.test(name.replace(/[-_\s]/g, ''));
}
