/**
 * The `none` backend has no wall between tenants: every sandbox is a process of the executor's
 * own user, and a command can read any workspace through `..`. So an executor on `none` serves
 * exactly one identity: the one the operator named (TOOLGATE_NONE_IDENTITY), else the first that
 * calls, for as long as the executor runs. Every other identity's tool call is refused with a
 * message saying why and what to do.
 */
import { ErrorCode, ProtocolError } from '../shared/protocol/errors';

export class SingleIdentity {
  private owner: string | undefined;

  constructor(named: string | undefined) {
    this.owner = named;
  }

  /** The tenant served, once known. */
  get tenant(): string | undefined {
    return this.owner;
  }

  /** Admits `tenant` (and, with no identity yet, binds to it); refuses any other. */
  admit(tenant: string): void {
    this.owner ??= tenant;
    if (tenant === this.owner) return;
    throw new ProtocolError(
      ErrorCode.PermissionDenied,
      'Refused: this server runs tools without an isolating sandbox (TOOLGATE_SANDBOX=none), so it serves a single identity, ' +
        'and that is another one. Ask the operator to run it with TOOLGATE_SANDBOX=bwrap or docker to serve several tenants.',
      { reason: 'single-identity' },
    );
  }
}
