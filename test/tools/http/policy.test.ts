/** TOOLGATE_HTTP_ALLOW parsing and matching: CIDRs, bare addresses, host:port entries. */
import { createHttpPolicy } from '../../../shared/tools/http/policy';

describe('createHttpPolicy', () => {
  it('allows nothing when the list is empty', () => {
    const policy = createHttpPolicy([]);
    expect(policy.allow).toEqual([]);
    expect(policy.allowsAddress('127.0.0.1', 80)).toBe(false);
    expect(policy.allowsHost('localhost', 80)).toBe(false);
  });

  it('keeps the entries as given', () => {
    expect(createHttpPolicy(['127.0.0.1/32', 'localhost:8080']).allow).toEqual(['127.0.0.1/32', 'localhost:8080']);
  });

  it('matches IPv4 and IPv6 CIDRs on any port, and v4-mapped addresses by their IPv4 form', () => {
    const policy = createHttpPolicy(['10.1.0.0/16', '::1/128', '::ffff:192.168.0.0/112']);
    expect(policy.allowsAddress('10.1.2.3', 1)).toBe(true);
    expect(policy.allowsAddress('10.1.2.3', 65535)).toBe(true);
    expect(policy.allowsAddress('::ffff:10.1.2.3', 80)).toBe(true);
    expect(policy.allowsAddress('10.2.0.1', 80)).toBe(false);
    expect(policy.allowsAddress('::1', 443)).toBe(true);
    expect(policy.allowsAddress('0:0:0:0:0:0:0:1', 443)).toBe(true);
    expect(policy.allowsAddress('::2', 443)).toBe(false);
    expect(policy.allowsAddress('192.168.3.4', 80)).toBe(true);
    expect(policy.allowsAddress('192.169.0.1', 80)).toBe(false);
  });

  it('takes a bare IPv4 address as a one-address CIDR', () => {
    const policy = createHttpPolicy(['127.0.0.1', '::1/128']);
    expect(policy.allowsAddress('127.0.0.1', 9)).toBe(true);
    expect(policy.allowsAddress('127.0.0.2', 9)).toBe(false);
    expect(policy.allowsAddress('::1', 9)).toBe(true);
  });

  it('matches ip:port entries only on that port, in any spelling of the address', () => {
    const policy = createHttpPolicy(['127.0.0.1:8080', '[::1]:9090', '2130706433:7070']);
    expect(policy.allowsAddress('127.0.0.1', 8080)).toBe(true);
    expect(policy.allowsAddress('127.0.0.1', 8081)).toBe(false);
    expect(policy.allowsAddress('::ffff:127.0.0.1', 8080)).toBe(true);
    expect(policy.allowsAddress('::1', 9090)).toBe(true);
    expect(policy.allowsAddress('::1', 8080)).toBe(false);
    expect(policy.allowsAddress('127.0.0.1', 7070)).toBe(true);
    expect(policy.allowsHost('127.0.0.1', 8080)).toBe(false);
  });

  it('matches name:port entries by the name, case-insensitively, without a trailing dot', () => {
    const policy = createHttpPolicy(['LocalHost.:8080', 'api.internal.example:443']);
    expect(policy.allowsHost('localhost', 8080)).toBe(true);
    expect(policy.allowsHost('localhost', 8081)).toBe(false);
    expect(policy.allowsHost('api.internal.example', 443)).toBe(true);
    expect(policy.allowsHost('internal.example', 443)).toBe(false);
    expect(policy.allowsAddress('127.0.0.1', 8080)).toBe(false);
  });

  it.each([
    'localhost',
    'localhost:',
    'localhost:0',
    'localhost:65536',
    'localhost:http',
    '127.0.0.1/33',
    '::1/129',
    '10.0.0.0/8x',
    'example.com/24',
    '::1:8080',
    '::1',
    'a b:80',
    'http://localhost:80',
    '*.example.com:443',
    '',
  ])('refuses the malformed entry %p with a sentence naming it', (entry) => {
    expect(() => createHttpPolicy(['127.0.0.1/32', entry])).toThrow(`TOOLGATE_HTTP_ALLOW entry "${entry}" is not valid`);
  });
});
