/**
 * What a sandbox needs to trust the executor's CA (the proxy's certificates for hosts that have
 * a secret): a bundle file of the system's roots plus the CA certificate (never its key), and the
 * variables that point every common client at it. The sandbox backend puts the bundle where its
 * commands can read it (the per-sandbox egress directory) and adds `trustEnv(thatPath)` to every
 * command's environment.
 */
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { writeAtomically } from '../write-atomically';

/** Where Debian, Alpine and RHEL keep the system bundle, in order. */
const SYSTEM_BUNDLES = ['/etc/ssl/certs/ca-certificates.crt', '/etc/ssl/cert.pem', '/etc/pki/tls/certs/ca-bundle.crt'];

export const BUNDLE_FILE = 'ca-bundle.pem';

/** Writes `<dir>/ca-bundle.pem` (system roots + `caPem`, mode 0644) and returns its path. */
export async function writeTrustBundle(dir: string, caPem: string, systemBundles: readonly string[] = SYSTEM_BUNDLES): Promise<string> {
  let system = '';
  for (const file of systemBundles) {
    system = await fs.readFile(file, 'utf8').catch(() => '');
    if (system) break;
  }
  const file = path.join(dir, BUNDLE_FILE);
  await fs.mkdir(dir, { recursive: true });
  await writeAtomically(file, `${system.trimEnd()}\n${caPem}`, 0o644);
  return file;
}

export { trustEnv } from '../../shared/tools/commands/environment';
