/**
 * What the trusted tools (http_request) and the egress proxy ask of the executor's secret store:
 * a tenant's secrets opened for one request, and the record of each use. Implemented in
 * executor/secrets/; absent in processes that have no secrets (stdio without a key, the gateway).
 */
import type { SecretSet } from './secret-set';

/** Where a secret was used. */
export type SecretTool = 'http_request' | 'egress';

/**
 * One use of a secret: published on the bus and written as an audit line. The value never
 * travels: a name, a host and who used it.
 */
export interface SecretUsedEvent {
  type: 'secret.used';
  tenant: string;
  /** The secret's name (what `{{secret:NAME}}` names). */
  name: string;
  /** The host the value was sent to (normalized), and its port. */
  host: string;
  port: number;
  tool: SecretTool;
  at: number;
}

/**
 * Secrets cannot be used (no TOOLGATE_SECRETS_KEY, one that is not 32 bytes, or one that does not
 * open the store). The message is a sentence saying which and what to do; it never holds a key.
 */
export class SecretsUnavailable extends Error {
  override readonly name = 'SecretsUnavailable';
}

export interface SecretBroker {
  /**
   * The tenant's secrets, opened (an empty set when it has none). Rejects with
   * SecretsUnavailable when the store cannot be used, or with the store's error when it cannot
   * be read; callers that were not asked to use a secret carry on without one.
   */
  open(tenant: string): Promise<SecretSet>;
  /** Records one use (audit line and bus event). Never throws. */
  used(event: Omit<SecretUsedEvent, 'type' | 'at'>): void;
}
