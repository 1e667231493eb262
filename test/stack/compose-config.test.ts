/**
 * docker-compose.yml as docker-compose itself reads it (`docker-compose config`, no daemon
 * needed): every service on the host network (no bridge network is ever created), restarted by
 * policy, health-checked and hardened; secrets only from the environment (.env), each service
 * getting only its own; public base images unless told otherwise; the two data volumes.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describeIf, hasCommand } from '../helpers/availability';

const REPO = path.resolve(__dirname, '../..');
const SECRETS = {
  TOOLGATE_JWT_SECRET: 'jwt-secret-for-the-config-test-0123456789',
  TOOLGATE_API_KEY: 'api-key-for-the-config-test-0123456789',
  TOOLGATE_REDIS_PASSWORD: 'redis-password-for-the-config-test',
  TOOLGATE_DATA_DIR: '/srv/toolgate-test',
};

interface Service {
  image?: string;
  build?: { args?: Record<string, string>; network?: string };
  network_mode?: string;
  networks?: unknown;
  restart?: string;
  healthcheck?: { test: string[] };
  read_only?: boolean;
  cap_drop?: string[];
  cap_add?: string[];
  security_opt?: string[];
  user?: string;
  environment?: Record<string, string>;
  volumes?: string[];
  device_cgroup_rules?: string[];
}

// An empty env file, so the repo's own .env (made by stack:up) is not read.
const tmp = mkdtempSync(path.join(os.tmpdir(), 'toolgate-compose-config-'));
const EMPTY_ENV = path.join(tmp, 'empty.env');
writeFileSync(EMPTY_ENV, '');
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** `docker-compose config` with exactly this environment. */
function config(env: Record<string, string>, files: string[] = ['docker-compose.yml']) {
  const r = spawnSync('docker-compose', ['--env-file', EMPTY_ENV, ...files.flatMap((f) => ['-f', f]), 'config'], {
    cwd: REPO,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env },
    encoding: 'utf8',
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** The YAML compose prints, read by PyYAML (which docker-compose itself depends on). */
function parsed(yaml: string): { services: Record<string, Service>; volumes: Record<string, unknown>; networks?: unknown } {
  const r = spawnSync('python3', ['-c', 'import sys, json, yaml; print(json.dumps(yaml.safe_load(sys.stdin)))'], { input: yaml, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`cannot parse the compose config: ${r.stderr}`);
  return JSON.parse(r.stdout) as ReturnType<typeof parsed>;
}

const hasYaml = spawnSync('python3', ['-c', 'import yaml'], { stdio: 'ignore' }).status === 0;

describeIf(hasCommand('docker-compose') && hasYaml, 'needs docker-compose (v1) and python3-yaml (which it depends on)', 'docker-compose.yml', () => {
  test('refuses to run without each secret, naming it', () => {
    for (const name of Object.keys(SECRETS)) {
      const env: Record<string, string> = { ...SECRETS };
      delete env[name];
      const r = config(env);
      expect(r.status).not.toBe(0);
      expect(r.stderr).toContain(name);
    }
  });

  test('every service: host network, a restart policy, a health check, hardened', () => {
    const r = config(SECRETS);
    expect(r.stderr).toBe('');
    const c = parsed(r.stdout);
    expect(Object.keys(c.services).sort()).toEqual(['caddy', 'executor', 'gateway', 'redis']);
    expect(c.networks).toBeUndefined();
    for (const [name, s] of Object.entries(c.services)) {
      expect([name, s.network_mode]).toEqual([name, 'host']);
      expect(s.networks).toBeUndefined();
      expect([name, s.restart]).toEqual([name, 'unless-stopped']);
      expect(s.healthcheck?.test.length).toBeGreaterThan(1);
      expect([name, s.read_only]).toEqual([name, true]);
      expect(s.cap_drop).toEqual(['ALL']);
      expect(s.security_opt).toContain('no-new-privileges:true');
    }
    // Only the executor gets capabilities back, and only these.
    // SYS_ADMIN and the loop devices are for the workspace disk quota (loop-mounted images).
    expect(c.services.executor!.cap_add).toEqual(['CHOWN', 'SYS_ADMIN']);
    expect(c.services.executor!.device_cgroup_rules).toEqual(['b 7:* rmw', 'c 10:237 rmw']);
    for (const name of ['caddy', 'gateway', 'redis']) expect(c.services[name]!.cap_add).toBeUndefined();
  });

  test('public images by default, one service image for gateway and executor, built with host network', () => {
    const c = parsed(config(SECRETS).stdout).services;
    expect(c.redis!.image).toBe('redis:7');
    expect(c.caddy!.image).toBe('caddy:2');
    expect(c.gateway!.image).toBe('toolgate:local');
    expect(c.executor!.image).toBe('toolgate:local');
    for (const name of ['gateway', 'executor']) {
      expect(c[name]!.build).toMatchObject({ network: 'host', args: { NODE_IMAGE: 'node:24-bookworm-slim', NODE_BUILD_IMAGE: 'node:24-bookworm' } });
    }
    const local = parsed(config({ ...SECRETS, NODE_IMAGE: 'local/node:24-bookworm-slim', CADDY_IMAGE: 'local/caddy:2' }).stdout).services;
    expect(local.gateway!.build!.args!.NODE_IMAGE).toBe('local/node:24-bookworm-slim');
    expect(local.caddy!.image).toBe('local/caddy:2');
  });

  test('each secret goes only where it is needed', () => {
    const c = parsed(config(SECRETS).stdout).services;
    const holders = (value: string) =>
      Object.entries(c)
        .filter(([, s]) => JSON.stringify(s.environment ?? {}).includes(value))
        .map(([n]) => n)
        .sort();
    expect(holders(SECRETS.TOOLGATE_JWT_SECRET)).toEqual(['gateway']);
    expect(holders(SECRETS.TOOLGATE_API_KEY)).toEqual(['caddy']);
    expect(holders(SECRETS.TOOLGATE_REDIS_PASSWORD)).toEqual(['executor', 'gateway', 'redis']);
    // Redis gets its password on stdin, not on its command line (which `ps` on the host shows).
    expect(JSON.stringify(c.redis)).not.toContain('--requirepass');
  });

  test('OAuth: off by default; the issuers and public URL reach the gateway, the OAuth path both gateway and Caddy', () => {
    const off = parsed(config(SECRETS).stdout).services;
    expect(off.gateway!.environment).toMatchObject({ TOOLGATE_OAUTH_ISSUERS: '', TOOLGATE_PUBLIC_URL: 'https://127.0.0.1:8443', TOOLGATE_OAUTH_PATH: '/mcp' });
    expect(off.caddy!.environment).toMatchObject({ TOOLGATE_OAUTH_PATH: '/mcp' });
    const on = parsed(
      config({
        ...SECRETS,
        TOOLGATE_OAUTH_ISSUERS: 'https://auth.example.com/realms/tools',
        TOOLGATE_PUBLIC_URL: 'https://tools.example.com',
        TOOLGATE_OAUTH_PATH: '/oauth',
      }).stdout,
    ).services;
    expect(on.gateway!.environment).toMatchObject({
      TOOLGATE_OAUTH_ISSUERS: 'https://auth.example.com/realms/tools',
      TOOLGATE_PUBLIC_URL: 'https://tools.example.com',
      TOOLGATE_OAUTH_PATH: '/oauth',
    });
    expect(on.caddy!.environment).toMatchObject({ TOOLGATE_OAUTH_PATH: '/oauth' });
    expect(on.executor!.environment!.TOOLGATE_OAUTH_ISSUERS).toBeUndefined();
  });

  test('volumes: Redis and Caddy data; the executor sees workspaces at their host path, and the Docker socket', () => {
    const c = parsed(config(SECRETS).stdout);
    expect(Object.keys(c.volumes).sort()).toEqual(['caddy-data', 'redis-data']);
    expect(c.services.redis!.volumes).toContain('redis-data:/data:rw');
    expect(c.services.caddy!.volumes).toContain('caddy-data:/data:rw');
    // rshared: the workspace images the executor mounts there must be seen by the Docker daemon.
    expect(c.services.executor!.volumes).toEqual(
      expect.arrayContaining(['/srv/toolgate-test:/srv/toolgate-test:rshared', '/var/run/docker.sock:/var/run/docker.sock:rw', '/dev:/dev:rw']),
    );
    expect(c.services.executor!.environment).toMatchObject({ TOOLGATE_WORKSPACE_QUOTA_BYTES: '1G', TOOLGATE_WORKSPACE_QUOTA_INODES: '65536' });
    expect(c.services.executor!.environment).toMatchObject({
      TOOLGATE_DATA_DIR: '/srv/toolgate-test',
      TOOLGATE_HOST_DATA_DIR: '/srv/toolgate-test',
      TOOLGATE_SANDBOX: 'docker',
    });
    expect(c.services.gateway!.volumes).toBeUndefined();
  });

  test('the TLS-files overlay switches Caddy to a mounted certificate', () => {
    const r = config({ ...SECRETS, TOOLGATE_TLS_DIR: '/etc/ssl/toolgate' }, ['docker-compose.yml', 'infra/caddy/docker-compose.tls-files.yml']);
    expect(r.stderr).toBe('');
    const caddy = parsed(r.stdout).services.caddy!;
    expect(caddy.environment).toMatchObject({
      TOOLGATE_TLS: 'files',
      TOOLGATE_TLS_CERT_FILE: '/etc/toolgate/tls/tls.crt',
      TOOLGATE_TLS_KEY_FILE: '/etc/toolgate/tls/tls.key',
    });
    expect(caddy.volumes).toContain('/etc/ssl/toolgate:/etc/toolgate/tls:ro');
    expect(config(SECRETS, ['docker-compose.yml', 'infra/caddy/docker-compose.tls-files.yml']).stderr).toContain('TOOLGATE_TLS_DIR');
  });
});
