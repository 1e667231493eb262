/**
 * Whose uid a sandbox for a given root runs as: the root's owner, so files the sandbox writes
 * keep that owner (a local user's checkout stays theirs, with no chown to a sandbox user first).
 * A root owned by root (uid 0) gets the backend's default unprivileged uid instead: the sandbox
 * never runs tools as root.
 */
import { promises as fs } from 'node:fs';

export async function sandboxOwner(root: string): Promise<{ uid?: number; gid?: number }> {
  const st = await fs.stat(root);
  return st.uid === 0 ? {} : { uid: st.uid, gid: st.gid === 0 ? st.uid : st.gid };
}
