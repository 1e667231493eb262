/**
 * The egress rule grammar and the policy's decisions: wildcard near-misses, port scoping, every
 * address form, deny over allow, and the SSRF guard that a host-name rule cannot lift (only an
 * IP/CIDR rule or an operator's pin can).
 */
import { createEgressPolicy, egressPolicy } from '../../executor/egress/policy';
import { EgressRuleError, parseRule, parseRules, ruleMatchesAddress, ruleMatchesName } from '../../executor/egress/rules';
import { createEgressResolver, parsePins } from '../../executor/egress/resolver';
import { egressFromConfig } from '../../executor/egress/index';
import { loadConfig } from '../../shared/config';

describe('parseRule', () => {
  it.each([
    ['example.com', { kind: 'host', host: 'example.com', ports: [80, 443] }],
    ['Example.COM.', { kind: 'host', host: 'example.com', ports: [80, 443] }],
    ['example.com:22', { kind: 'host', host: 'example.com', ports: [22] }],
    ['*.example.com', { kind: 'subdomains', suffix: '.example.com', ports: [80, 443] }],
    ['*.example.com:8443', { kind: 'subdomains', suffix: '.example.com', ports: [8443] }],
    ['bücher.example', { kind: 'host', host: 'xn--bcher-kva.example' }],
    ['203.0.113.7', { kind: 'network', bits: 32, ports: [80, 443] }],
    ['203.0.113.7:8080', { kind: 'network', bits: 32, ports: [8080] }],
    ['10.0.0.0/8', { kind: 'network', bits: 8, ports: [80, 443] }],
    ['10.0.0.0/8:5432', { kind: 'network', bits: 8, ports: [5432] }],
    ['::1', { kind: 'network', bits: 128, ports: [80, 443] }],
    ['[::1]', { kind: 'network', bits: 128, ports: [80, 443] }],
    ['[::1]:8080', { kind: 'network', bits: 128, ports: [8080] }],
    ['fd00::/8', { kind: 'network', bits: 8, ports: [80, 443] }],
    ['fd00::/8:443', { kind: 'network', bits: 8, ports: [443] }],
    ['[fd00::/8]:443', { kind: 'network', bits: 8, ports: [443] }],
    ['::ffff:10.0.0.0/104', { kind: 'network', bits: 8 }],
  ])('%s', (text, expected) => {
    expect(parseRule(text)).toMatchObject({ text, ...expected });
  });

  it.each([
    ['', 'it is empty'],
    ['example.com:0', 'port must be a number from 1 to 65535'],
    ['example.com:70000', 'port'],
    ['example.com:http', 'port'],
    ['a*.example.com', 'not a host name'],
    ['*example.com', 'not a host name'],
    ['*.*.example.com', 'not a host name'],
    ['*', 'not a host name'],
    ['*.10.0.0.1', 'a wildcard takes a name'],
    ['exa mple.com', 'not a host name'],
    ['10.0.0.0/33', 'prefix length must be 0 to 32'],
    ['10.0.0.0/x', 'prefix length'],
    ['[example.com]:80', 'only an IPv6'],
    ['a:b:c', 'too many colons'],
    ['http://example.com', 'without a scheme'],
  ])('refuses %j, naming it', (text, why) => {
    expect(() => parseRule(text, 'TOOLGATE_EGRESS_ALLOW')).toThrow(EgressRuleError);
    expect(() => parseRule(text, 'TOOLGATE_EGRESS_ALLOW')).toThrow(`TOOLGATE_EGRESS_ALLOW: "${text}" is not a valid rule`);
    expect(() => parseRule(text)).toThrow(why);
  });

  it('parses comma-separated lists and names the bad rule among good ones', () => {
    expect(parseRules(' a.example , *.b.example:22,, 10.0.0.0/8 ').map((r) => r.text)).toEqual(['a.example', '*.b.example:22', '10.0.0.0/8']);
    expect(() => parseRules('a.example,b..example,c.example', '--allow')).toThrow('--allow: "b..example" is not a valid rule');
  });
});

describe('matching', () => {
  const wild = parseRule('*.example.com');
  it.each(['a.example.com', 'a.b.example.com'])('*.example.com matches %s', (host) => expect(ruleMatchesName(wild, host, 443)).toBe(true));
  it.each(['example.com', 'evilexample.com', 'example.com.evil.example', 'aexample.com', 'example.co', 'xexample.com'])(
    '*.example.com never matches the near-miss %s',
    (host) => expect(ruleMatchesName(wild, host, 443)).toBe(false),
  );
  it('a host rule matches only that name', () => {
    const rule = parseRule('example.com');
    expect(ruleMatchesName(rule, 'example.com', 80)).toBe(true);
    for (const host of ['a.example.com', 'example.com.evil.example', 'evilexample.com']) expect(ruleMatchesName(rule, host, 80)).toBe(false);
  });
  it('scopes ports: no port means 80 and 443 only; a port means that port only', () => {
    const plain = parseRule('example.com');
    expect([80, 443, 22, 8080].map((p) => ruleMatchesName(plain, 'example.com', p))).toEqual([true, true, false, false]);
    const ssh = parseRule('example.com:22');
    expect([80, 443, 22].map((p) => ruleMatchesName(ssh, 'example.com', p))).toEqual([false, false, true]);
    const net = parseRule('10.0.0.0/8:5432');
    expect(ruleMatchesAddress(net, '10.1.2.3', 5432)).toBe(true);
    expect(ruleMatchesAddress(net, '10.1.2.3', 443)).toBe(false);
    expect(ruleMatchesAddress(net, '11.1.2.3', 5432)).toBe(false);
  });
  it('an IPv4 rule matches the IPv4-mapped IPv6 spelling, and families never cross', () => {
    expect(ruleMatchesAddress(parseRule('127.0.0.1'), '::ffff:127.0.0.1', 80)).toBe(true);
    expect(ruleMatchesAddress(parseRule('::ffff:127.0.0.1'), '127.0.0.1', 80)).toBe(true);
    expect(ruleMatchesAddress(parseRule('::/0'), '127.0.0.1', 80)).toBe(false);
    expect(ruleMatchesAddress(parseRule('[::1]:8080'), '::1', 8080)).toBe(true);
  });
  it('a name rule never matches an address and an address rule never matches a name', () => {
    expect(ruleMatchesName(parseRule('127.0.0.1'), '127.0.0.1', 80)).toBe(false);
    expect(ruleMatchesAddress(parseRule('example.com'), '93.184.216.34', 80)).toBe(false);
  });
});

describe('EgressPolicy.decide', () => {
  const PUBLIC = '93.184.216.34';
  it('an empty allow list refuses everything', () => {
    const policy = egressPolicy([]);
    expect(policy.decide({ host: 'example.com', port: 443 })).toEqual({ allowed: false, reason: "not in this tenant's policy" });
    expect(policy.decide({ host: PUBLIC, port: 443 })).toEqual({ allowed: false, reason: "not in this tenant's policy" });
  });
  it('allows a named host before and after resolving to a public address, on its ports only', () => {
    const policy = createEgressPolicy({ allow: 'example.com' });
    expect(policy.decide({ host: 'example.com', port: 443 }).allowed).toBe(true);
    expect(policy.decide({ host: 'example.com', port: 443, address: PUBLIC }).allowed).toBe(true);
    expect(policy.decide({ host: 'example.com', port: 22 })).toMatchObject({ allowed: false, reason: "not in this tenant's policy" });
    expect(policy.decide({ host: 'other.example', port: 443 }).allowed).toBe(false);
  });
  it('deny wins over allow, by name and by address', () => {
    const policy = createEgressPolicy({ allow: '*.corp.example,0.0.0.0/0:443', deny: 'bad.corp.example,93.184.216.0/24:443' });
    expect(policy.decide({ host: 'good.corp.example', port: 443 }).allowed).toBe(true);
    expect(policy.decide({ host: 'bad.corp.example', port: 443 })).toEqual({ allowed: false, reason: "denied by this tenant's policy" });
    expect(policy.decide({ host: 'good.corp.example', port: 443, address: '93.184.216.9' })).toEqual({
      allowed: false,
      reason: "denied by this tenant's policy",
    });
    expect(policy.decide({ host: '93.184.216.9', port: 443 }).allowed).toBe(false);
    expect(policy.decide({ host: '93.184.217.9', port: 443 }).allowed).toBe(true);
  });
  it('a host-name rule never opens a private, loopback, link-local or metadata address (DNS rebinding)', () => {
    const policy = createEgressPolicy({ allow: 'rebind.example,*.rebind.example' });
    for (const [address, label] of [
      ['127.0.0.1', 'loopback'],
      ['10.1.2.3', 'private'],
      ['169.254.169.254', 'cloud metadata'],
      ['fe80::1', 'link-local'],
      ['::ffff:192.168.0.1', 'private, as IPv4-mapped 192.168.0.1'],
    ]) {
      expect(policy.decide({ host: 'rebind.example', port: 443, address })).toEqual({
        allowed: false,
        reason: `rebind.example resolves to ${address}, a ${label} address`,
      });
    }
  });
  it('an explicit IP or CIDR rule opens a private address, for a literal or a name resolving into it', () => {
    const policy = createEgressPolicy({ allow: '127.0.0.1:8080,10.0.0.0/8' });
    expect(policy.decide({ host: '127.0.0.1', port: 8080 }).allowed).toBe(true);
    expect(policy.decide({ host: '127.0.0.1', port: 8081 })).toMatchObject({ allowed: false });
    expect(policy.decide({ host: 'mirror.internal', port: 443, address: '10.9.9.9' }).allowed).toBe(true);
    expect(policy.decide({ host: 'mirror.internal', port: 443, address: '11.9.9.9' }).allowed).toBe(false);
    expect(createEgressPolicy({ allow: 'example.com' }).decide({ host: '127.0.0.1', port: 80 })).toMatchObject({ allowed: false });
  });
  it('a pinned name reaches its private address when a rule allows the name, and only then', () => {
    const policy = createEgressPolicy({ allow: 'mirror.internal:8080' });
    expect(policy.decide({ host: 'mirror.internal', port: 8080, address: '127.0.0.1', pinned: true }).allowed).toBe(true);
    expect(policy.decide({ host: 'mirror.internal', port: 8080, address: '127.0.0.1', pinned: false }).allowed).toBe(false);
    expect(policy.decide({ host: 'other.internal', port: 8080, address: '127.0.0.1', pinned: true }).allowed).toBe(false);
  });
  it('refuses metadata host names before resolving, unless pinned', () => {
    const policy = createEgressPolicy({ allow: 'metadata.google.internal' });
    expect(policy.decide({ host: 'metadata.google.internal', port: 80 })).toEqual({
      allowed: false,
      reason: 'metadata.google.internal is a cloud metadata host name',
    });
    expect(policy.decide({ host: 'metadata.google.internal', port: 80, pinned: true }).allowed).toBe(true);
  });
  it('before resolving, an unnamed host passes only when an address rule covers the port', () => {
    const policy = createEgressPolicy({ allow: '10.0.0.0/8:5432' });
    expect(policy.decide({ host: 'db.internal', port: 5432 }).allowed).toBe(true);
    expect(policy.decide({ host: 'db.internal', port: 443 }).allowed).toBe(false);
  });
});

describe('pins and config', () => {
  it('parses name=ip pins and refuses bad ones, naming them', async () => {
    const pins = parsePins('Mirror.Internal=10.0.0.5, v6.internal=[::1]');
    expect([...pins]).toEqual([
      ['mirror.internal', '10.0.0.5'],
      ['v6.internal', '::1'],
    ]);
    for (const bad of ['mirror.internal', '=10.0.0.1', 'mirror.internal=not-an-ip', '10.0.0.1=10.0.0.2']) {
      expect(() => parsePins(bad)).toThrow(`TOOLGATE_EGRESS_RESOLVE: "${bad}" is not valid`);
    }
    const resolver = createEgressResolver({ pins, lookup: async () => [{ address: '93.184.216.34', family: 4 }] });
    expect(resolver.isPinned('mirror.internal')).toBe(true);
    await expect(resolver.resolve('mirror.internal')).resolves.toEqual({ addresses: ['10.0.0.5'], pinned: true });
    await expect(resolver.resolve('example.com')).resolves.toEqual({ addresses: ['93.184.216.34'], pinned: false });
    await expect(resolver.resolve('127.0.0.1')).resolves.toEqual({ addresses: ['127.0.0.1'], pinned: false });
  });
  it('reads the egress section with its defaults, and egressFromConfig names a bad variable', () => {
    const defaults = loadConfig({}, '/tmp').egress;
    expect(defaults).toMatchObject({ allow: [], deny: [], resolve: [], caFile: undefined, maxConnectionsPerTenant: 64, bytesPerDayPerTenant: 1024 ** 3 });
    const config = loadConfig(
      {
        TOOLGATE_EGRESS_ALLOW: 'github.com,*.github.com',
        TOOLGATE_EGRESS_DENY: 'gist.github.com',
        TOOLGATE_EGRESS_RESOLVE: 'mirror.internal=10.0.0.5',
        TOOLGATE_EGRESS_CA_FILE: 'ca.pem',
        TOOLGATE_EGRESS_MAX_CONNECTIONS: '8',
        TOOLGATE_EGRESS_BYTES_PER_DAY: '512M',
      },
      '/srv',
    ).egress;
    expect(config).toMatchObject({ caFile: '/srv/ca.pem', maxConnectionsPerTenant: 8, bytesPerDayPerTenant: 512 * 1024 ** 2 });
    const settings = egressFromConfig(config);
    expect(settings.defaults.decide({ host: 'api.github.com', port: 443 }).allowed).toBe(true);
    expect(settings.defaults.decide({ host: 'gist.github.com', port: 443 }).allowed).toBe(false);
    expect(settings.limits).toEqual({ maxConnections: 8, bytesPerDay: 512 * 1024 ** 2 });
    expect(() => egressFromConfig(loadConfig({ TOOLGATE_EGRESS_DENY: 'x..y' }).egress)).toThrow('TOOLGATE_EGRESS_DENY: "x..y"');
    expect(() => loadConfig({ TOOLGATE_EGRESS_BYTES_PER_DAY: 'lots' })).toThrow('TOOLGATE_EGRESS_BYTES_PER_DAY');
  });
});
