/**
 * Tokens whose signature and claims already passed, by their exact string, least recently used
 * dropped first. Verifying a token (a signature, a JSON parse) gives the same answer every time
 * the same string comes back; what depends on the clock or on revocations does not, so `hit`
 * runs the caller's time check on every use and forgets an entry that fails it. Only verified
 * tokens are kept, so a flood of forged tokens cannot fill it. (An introspected token's answer is
 * kept the same way; the OAuth authenticator `forget`s it when it is due to be asked for again.)
 */
export class VerifiedTokens<T> {
  /** Token string → its verified claims; Map order is recency. */
  private readonly verified = new Map<string, T>();

  constructor(private readonly size: number) {}

  /** The cached claims of `token` after `check` passes (it throws to refuse), or undefined when not cached. */
  hit(token: string, check: (claims: T) => void): T | undefined {
    const claims = this.verified.get(token);
    if (claims === undefined) return undefined;
    try {
      check(claims);
    } catch (err) {
      // Refused now (expired, revoked, clock moved back): a later request verifies afresh.
      this.verified.delete(token);
      throw err;
    }
    this.verified.delete(token);
    this.verified.set(token, claims);
    return claims;
  }

  /** Drops `token` (e.g. an answer that must be asked for again). */
  forget(token: string): void {
    this.verified.delete(token);
  }

  remember(token: string, claims: T): void {
    if (this.size <= 0) return;
    this.verified.set(token, claims);
    if (this.verified.size > this.size) this.verified.delete(this.verified.keys().next().value!);
  }
}
