/** TOOLGATE_REDIS_*: one Redis by URL, Sentinel or Cluster, parsed once into `config.redis`. */
import { ConfigError, loadConfig } from '../../shared/config';
import { describeRedis } from '../../shared/redis-config';

describe('Redis configuration', () => {
  it('is absent without Redis variables (the in-process bus)', () => {
    expect(loadConfig({}).redis).toBeUndefined();
  });

  it('reads a URL, with TLS for rediss:// and an ACL login', () => {
    expect(loadConfig({ TOOLGATE_REDIS_URL: 'rediss://h:6380', TOOLGATE_REDIS_USERNAME: 'tg', TOOLGATE_REDIS_PASSWORD: 'pw' }).redis).toEqual({
      topology: 'url',
      url: 'rediss://h:6380',
      username: 'tg',
      password: 'pw',
      tls: true,
    });
  });

  it('reads Sentinels and the master name, with their own login', () => {
    const redis = loadConfig({
      TOOLGATE_REDIS_SENTINELS: 's1:26379, [::1]:26380',
      TOOLGATE_REDIS_SENTINEL_MASTER: 'toolgate',
      TOOLGATE_REDIS_SENTINEL_PASSWORD: 'sp',
      TOOLGATE_REDIS_TLS: 'on',
    }).redis!;
    expect(redis).toMatchObject({
      topology: 'sentinel',
      sentinels: [
        { host: 's1', port: 26379 },
        { host: '::1', port: 26380 },
      ],
      masterName: 'toolgate',
      sentinelPassword: 'sp',
      tls: true,
    });
    expect(describeRedis(redis)).toBe('the Redis master "toolgate" of the Sentinels s1:26379,::1:26380');
  });

  it('reads Cluster nodes', () => {
    expect(loadConfig({ TOOLGATE_REDIS_CLUSTER_NODES: 'n1:7000,n2:7001' }).redis).toMatchObject({
      topology: 'cluster',
      nodes: [
        { host: 'n1', port: 7000 },
        { host: 'n2', port: 7001 },
      ],
      tls: false,
    });
  });

  it('refuses what it cannot use, with a sentence naming the variable', () => {
    const bad: Array<[Record<string, string>, RegExp]> = [
      [{ TOOLGATE_REDIS_URL: 'http://u:secret@h' }, /TOOLGATE_REDIS_URL must start with redis:\/\/ .*"http:\/\/\*\*\*@h"/],
      [{ TOOLGATE_REDIS_URL: 'redis://h', TOOLGATE_REDIS_CLUSTER_NODES: 'h:1' }, /set only one of TOOLGATE_REDIS_URL, TOOLGATE_REDIS_CLUSTER_NODES/],
      [{ TOOLGATE_REDIS_SENTINELS: 'h:26379' }, /needs TOOLGATE_REDIS_SENTINEL_MASTER/],
      [{ TOOLGATE_REDIS_CLUSTER_NODES: 'h' }, /TOOLGATE_REDIS_CLUSTER_NODES must be comma-separated host:port pairs, got "h"/],
      [{ TOOLGATE_REDIS_CLUSTER_NODES: 'h:70000' }, /host:port pairs, got "h:70000"/],
      [{ TOOLGATE_REDIS_URL: 'redis://h', TOOLGATE_REDIS_TLS: 'maybe' }, /TOOLGATE_REDIS_TLS must be on or off/],
    ];
    for (const [env, message] of bad) {
      expect(() => loadConfig(env)).toThrow(ConfigError);
      expect(() => loadConfig(env)).toThrow(message);
    }
  });
});
