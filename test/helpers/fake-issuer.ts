/**
 * A minimal authorization server for the OAuth verifier's own tests: OpenID discovery and a JWKS
 * on 127.0.0.1, keys made here, so a test can sign any token it wants (expired, another
 * audience, an unknown kid, alg confusion) and make the key set slow or down. Its RFC 7662
 * introspection endpoint answers what the test puts in `introspection` for each token.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, exportSPKI, generateKeyPair, SignJWT, type JWTPayload } from 'jose';

export type JwksMode = 'ok' | 'down' | 'slow' | 'refused';

/** One request to the introspection endpoint, as received. */
export interface IntrospectionRequest {
  readonly authorization: string | undefined;
  readonly contentType: string | undefined;
  readonly form: Readonly<Record<string, string>>;
}

export interface FakeIssuer {
  readonly issuer: string;
  /** What the JWKS endpoint does now. */
  jwksMode: JwksMode;
  /** How many times the JWKS was fetched. */
  readonly jwksFetches: number;
  /** Token → the introspection answer (a JSON object), or what the endpoint does instead; unknown tokens get `{active: false}`. */
  introspection: Map<string, Record<string, unknown> | 'slow' | 'down'>;
  /** Every introspection request so far. */
  readonly introspections: readonly IntrospectionRequest[];
  /** Whether the metadata names the introspection endpoint (default true). */
  advertiseIntrospection: boolean;
  /** The RSA public key as PEM (for the HS256-with-the-public-key confusion). */
  readonly rsaPublicPem: string;
  /** Signs `claims` (iss defaults to this issuer) with the ES256 key `es-1`, or as told. */
  sign(claims: JWTPayload, options?: { kid?: string; alg?: 'ES256' | 'RS256'; typ?: string; unknownKey?: boolean }): Promise<string>;
  close(): Promise<void>;
}

export async function startFakeIssuer(): Promise<FakeIssuer> {
  const es = await generateKeyPair('ES256', { extractable: true });
  const rs = await generateKeyPair('RS256', { extractable: true });
  const stranger = await generateKeyPair('ES256', { extractable: true });
  const jwks = {
    keys: [
      { ...(await exportJWK(es.publicKey)), kid: 'es-1', alg: 'ES256', use: 'sig' },
      { ...(await exportJWK(rs.publicKey)), kid: 'rs-1', alg: 'RS256', use: 'sig' },
    ],
  };
  let fetches = 0;
  const held: http.ServerResponse[] = [];
  const introspections: IntrospectionRequest[] = [];
  const introspect = async (req: http.IncomingMessage, res: http.ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const form = Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString('utf8')));
    introspections.push({ authorization: req.headers.authorization, contentType: req.headers['content-type'], form });
    const answer = state.introspection.get(form.token ?? '') ?? { active: false };
    if (answer === 'slow') return void held.push(res);
    if (answer === 'down') return void res.writeHead(500).end();
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(answer));
  };
  const server = http.createServer((req, res) => {
    if (req.url === '/.well-known/openid-configuration') {
      res.setHeader('content-type', 'application/json');
      const introspection = state.advertiseIntrospection ? { introspection_endpoint: `${state.issuer}/introspect` } : {};
      res.end(JSON.stringify({ issuer: state.issuer, jwks_uri: `${state.issuer}/jwks`, ...introspection }));
      return;
    }
    if (req.url === '/introspect' && req.method === 'POST') return void introspect(req, res);
    if (req.url === '/jwks') {
      fetches++;
      if (state.jwksMode === 'slow') return void held.push(res); // never answered
      if (state.jwksMode === 'down') return void res.writeHead(503).end();
      if (state.jwksMode === 'refused') return void req.socket.destroy();
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(jwks));
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const state: FakeIssuer = {
    issuer: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    jwksMode: 'ok',
    get jwksFetches() {
      return fetches;
    },
    introspection: new Map(),
    introspections,
    advertiseIntrospection: true,
    rsaPublicPem: await exportSPKI(rs.publicKey),
    async sign(claims, options = {}) {
      const alg = options.alg ?? 'ES256';
      const key = options.unknownKey ? stranger.privateKey : alg === 'RS256' ? rs.privateKey : es.privateKey;
      const kid = options.kid ?? (options.unknownKey ? 'gone-1' : alg === 'RS256' ? 'rs-1' : 'es-1');
      const now = Math.floor(Date.now() / 1000);
      return new SignJWT({ iss: state.issuer, sub: 'alice', iat: now, exp: now + 600, ...claims })
        .setProtectedHeader({ alg, kid, typ: options.typ ?? 'at+jwt' })
        .sign(key);
    },
    async close() {
      for (const res of held) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  return state;
}
