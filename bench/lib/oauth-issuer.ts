/**
 * An authorization server as small as a benchmark needs: OpenID discovery and one ES256 key on
 * 127.0.0.1, and access tokens signed here for a given audience. The gateway fetches the key once;
 * after that an OAuth call costs what the verified-token cache costs.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface BenchIssuer {
  issuer: string;
  token(audience: string, sub: string, scope: string): Promise<string>;
  close(): Promise<void>;
}

export async function startBenchIssuer(): Promise<BenchIssuer> {
  const { exportJWK, generateKeyPair, SignJWT } = await import('jose');
  const { privateKey, publicKey } = await generateKeyPair('ES256');
  const jwks = JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid: 'bench-1', alg: 'ES256', use: 'sig' }] });
  let issuer = '';
  const server = http.createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    if (req.url === '/.well-known/openid-configuration') res.end(JSON.stringify({ issuer, jwks_uri: `${issuer}/jwks` }));
    else if (req.url === '/jwks') res.end(jwks);
    else res.writeHead(404).end('{}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    issuer,
    token: (audience, sub, scope) => {
      const now = Math.floor(Date.now() / 1000);
      return new SignJWT({ iss: issuer, sub, aud: audience, scope, iat: now - 5, exp: now + 86_400 })
        .setProtectedHeader({ alg: 'ES256', kid: 'bench-1', typ: 'at+jwt' })
        .sign(privateKey);
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
