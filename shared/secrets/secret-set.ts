/**
 * A tenant's secrets, opened, as the trusted side uses them for one request: which apply to a
 * host, the request's header values with placeholders swapped (inside Basic credentials too) and
 * header templates added, and the redaction of every value in what comes back.
 *
 * Pure logic: the host matching is each secret's own function (built from the egress rule
 * grammar by the executor), so http_request and the egress proxy apply one set of rules.
 */
import { hasPlaceholder, placeholder, placeholderNames, replacePlaceholders } from './placeholder';

/** One secret with its value, as the executor opens it. Never logged or returned. */
export interface OpenSecret {
  readonly name: string;
  /** The host rules as written (`api.github.com`, `*.example.com:8443`), for messages. */
  readonly hostText: string;
  /** True when host:port is one the secret may be sent to. */
  matches(host: string, port: number): boolean;
  /** A header added to requests to a matching host that lack it: `{value}` stands for the value. */
  readonly header?: { readonly name: string; readonly template: string };
  readonly value: string;
}

/** A header value holds a placeholder the request may not carry to this host. */
export interface SecretRefusal {
  name: string;
  /** Why, as a sentence that names the secret and hosts but never the value. */
  reason: string;
}

/** Header pairs as Node writes raw headers: name, value, name, value, … */
export type RawHeaders = string[];

/** What binding did to one request's headers. */
export interface BoundHeaders {
  headers: RawHeaders;
  /** The secrets whose values went into the headers. */
  used: string[];
  /** Placeholders left as written: unknown names, or secrets not bound to this host. */
  refused: SecretRefusal[];
}

const BASIC = /^(\s*basic\s+)([A-Za-z0-9+/=_-]+)\s*$/i;

export class SecretSet {
  private readonly byName: ReadonlyMap<string, OpenSecret>;
  /** Each value with the text that replaces it in responses, longest first (a value inside another). */
  private readonly redactions: ReadonlyArray<readonly [Buffer, Buffer]>;

  constructor(
    readonly tenant: string,
    secrets: readonly OpenSecret[],
  ) {
    this.byName = new Map(secrets.map((s) => [s.name, s]));
    const pairs: Array<readonly [Buffer, Buffer]> = [];
    for (const s of secrets) {
      const mark = Buffer.from(`[secret:${s.name}]`);
      const forms = new Set([s.value, Buffer.from(s.value).toString('base64'), Buffer.from(s.value).toString('base64url'), encodeURIComponent(s.value)]);
      for (const form of forms) pairs.push([Buffer.from(form.replace(/=+$/, '')), mark]);
    }
    this.redactions = pairs.sort((a, b) => b[0].length - a[0].length);
  }

  get names(): string[] {
    return [...this.byName.keys()];
  }

  get size(): number {
    return this.byName.size;
  }

  /** The secrets bound to host:port. */
  forHost(host: string, port: number): OpenSecret[] {
    return [...this.byName.values()].filter((s) => s.matches(host, port));
  }

  /**
   * Swaps placeholders for the values of secrets bound to host:port and adds the header
   * templates of those secrets the request lacks. Placeholders it may not swap stay as written.
   */
  bind(raw: readonly string[], host: string, port: number): BoundHeaders {
    const used = new Set<string>();
    const refused = new Map<string, SecretRefusal>();
    const value = (name: string): string | undefined => {
      const secret = this.byName.get(name);
      if (secret && secret.matches(host, port)) {
        used.add(name);
        return secret.value;
      }
      if (!refused.has(name)) refused.set(name, { name, reason: this.refusal(name, host, port) });
      return undefined;
    };
    const headers: RawHeaders = [];
    const present = new Set<string>();
    for (let i = 0; i + 1 < raw.length; i += 2) {
      const name = raw[i] as string;
      let text = raw[i + 1] as string;
      present.add(name.toLowerCase());
      if (hasPlaceholder(text)) text = replacePlaceholders(text, value);
      text = this.bindBasic(text, value);
      headers.push(name, text);
    }
    for (const secret of this.forHost(host, port)) {
      if (!secret.header || present.has(secret.header.name.toLowerCase())) continue;
      present.add(secret.header.name.toLowerCase());
      headers.push(secret.header.name, secret.header.template.split('{value}').join(secret.value));
      used.add(secret.name);
    }
    return { headers, used: [...used], refused: [...refused.values()] };
  }

  /** Basic credentials hold `user:password` in base64: a placeholder there is swapped inside it. */
  private bindBasic(text: string, value: (name: string) => string | undefined): string {
    const m = BASIC.exec(text);
    if (!m) return text;
    const decoded = Buffer.from(m[2] as string, 'base64').toString('utf8');
    if (!hasPlaceholder(decoded)) return text;
    const swapped = replacePlaceholders(decoded, value, true);
    return swapped === decoded ? text : `${m[1]}${Buffer.from(swapped, 'utf8').toString('base64')}`;
  }

  /** Why a placeholder may not go to host:port. */
  refusal(name: string, host: string, port: number): string {
    const secret = this.byName.get(name);
    if (!secret) return `${placeholder(name)}: this identity has no secret named ${name}`;
    return `${placeholder(name)} may only be sent to ${secret.hostText}, not to ${host.includes(':') ? `[${host}]` : host}:${port}`;
  }

  /** The names of the placeholders in header values (as written, not inside Basic credentials). */
  static placeholdersIn(values: Iterable<string>): string[] {
    const names = new Set<string>();
    for (const v of values) for (const n of placeholderNames(v)) names.add(n);
    return [...names];
  }

  /** `text` with every form of every value replaced by `[secret:NAME]`. */
  redactText(text: string): string {
    if (this.redactions.length === 0) return text;
    let out = text;
    for (const [value, mark] of this.redactions) if (out.includes(value.toString())) out = out.split(value.toString()).join(mark.toString());
    return out;
  }

  /** `bytes` with every form of every value replaced by `[secret:NAME]`. */
  redactBytes(bytes: Buffer): Buffer {
    let out = bytes;
    for (const [value, mark] of this.redactions) {
      let at = out.indexOf(value);
      if (at === -1) continue;
      const parts: Buffer[] = [];
      let from = 0;
      while (at !== -1) {
        parts.push(out.subarray(from, at), mark);
        from = at + value.length;
        at = out.indexOf(value, from);
      }
      parts.push(out.subarray(from));
      out = Buffer.concat(parts);
    }
    return out;
  }

  /** Every form of every value that is redacted (a stream redactor looks for them across chunks). */
  get valueForms(): Buffer[] {
    return this.redactions.map(([value]) => value);
  }

  /** The longest form a value takes in responses: a stream redactor keeps this many bytes back. */
  get longestValue(): number {
    return this.redactions[0]?.[0].length ?? 0;
  }
}
