/**
 * The gateway's JSON-RPC endpoints and who authenticates each: the one list an auth method is
 * added to (its module beside this file, one line below, and its settings in `shared/config.ts`).
 */
import type { Revocations } from '../../shared/bus/bus';
import type { OAuthConfig } from '../../shared/oauth-config';
import type { Authenticators } from './authenticator';
import { createHs256Authenticator } from './hs256';
import { createOAuthAuthenticator } from './oauth';

export type { AuthRequest, Authenticator, Authenticators } from './authenticator';

export interface AuthenticatorsOptions {
  /** The token signing secret (already resolved: TOOLGATE_JWT_SECRET or the data directory's file). */
  secret: string;
  /** The revocation cut-offs, as the bus keeps them. */
  revocations: Pick<Revocations, 'notBefore'>;
  /** The OAuth endpoint's settings (config.oauth); undefined: no OAuth endpoint. */
  oauth?: Readonly<OAuthConfig>;
}

export function createAuthenticators(options: AuthenticatorsOptions): Authenticators {
  return {
    '/': createHs256Authenticator({ secret: options.secret, revocations: options.revocations }),
    ...(options.oauth && { [options.oauth.path]: createOAuthAuthenticator({ config: options.oauth, revocations: options.revocations }) }),
  };
}
