/**
 * The pure classification behind the SSRF guard. Private, public and metadata ranges are tested
 * here, never by making requests: tests only ever connect to loopback.
 */
import { classifyAddress, classifyHostname } from '../../../shared/tools/http/address-class';

describe('classifyAddress refuses', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['10.0.0.1', 'private'],
    ['10.255.255.255', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'carrier-grade NAT'],
    ['100.127.255.255', 'carrier-grade NAT'],
    ['169.254.0.1', 'link-local'],
    ['169.254.169.254', 'cloud metadata'],
    ['169.254.170.2', 'cloud metadata'],
    ['100.100.100.200', 'cloud metadata'],
    ['192.0.0.8', 'IETF protocol assignments'],
    ['192.0.2.1', 'documentation'],
    ['198.51.100.7', 'documentation'],
    ['203.0.113.9', 'documentation'],
    ['198.18.0.1', 'benchmarking'],
    ['198.19.255.255', 'benchmarking'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['240.0.0.1', 'reserved'],
    ['255.255.255.255', 'broadcast'],
    ['::', 'unspecified'],
    ['::1', 'loopback'],
    ['[::1]', 'loopback'],
    ['fc00::1', 'unique-local'],
    ['fd12:3456::1', 'unique-local'],
    ['fd00:ec2::254', 'cloud metadata'],
    ['fe80::1', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['febf::1', 'link-local'],
    ['fec0::1', 'site-local'],
    ['ff02::1', 'multicast'],
    ['2001:db8::1', 'documentation'],
    ['::ffff:127.0.0.1', 'loopback, as IPv4-mapped 127.0.0.1'],
    ['::ffff:7f00:1', 'loopback, as IPv4-mapped 127.0.0.1'],
    ['::ffff:10.1.2.3', 'private, as IPv4-mapped 10.1.2.3'],
    ['::ffff:169.254.169.254', 'cloud metadata, as IPv4-mapped 169.254.169.254'],
    ['0:0:0:0:0:ffff:c0a8:0101', 'private, as IPv4-mapped 192.168.1.1'],
    ['::ffff:0:7f00:1', 'loopback, as IPv4-translated 127.0.0.1'],
    ['64:ff9b::7f00:1', 'loopback, as NAT64 127.0.0.1'],
    ['64:ff9b::a9fe:a9fe', 'cloud metadata, as NAT64 169.254.169.254'],
    ['64:ff9b:1::1', 'local-use NAT64'],
    ['::127.0.0.1', 'loopback, as IPv4-compatible 127.0.0.1'],
    ['2002:7f00:1::1', 'loopback, as 6to4 127.0.0.1'],
    ['2002:c0a8:101::', 'private, as 6to4 192.168.1.1'],
    ['2001:0:4136:e378::1', 'Teredo tunnel'],
    ['100::1', 'discard-only'],
  ])('%s (%s)', (address, label) => {
    expect(classifyAddress(address)).toContain(label);
  });

  it.each(['localhost', '2130706433', '0x7f000001', '127.1', '', 'example.com', '1.2.3.4.5'])('anything that is not a canonical IP literal: %p', (value) => {
    expect(classifyAddress(value)).toBe('not a recognised IP address');
  });
});

describe('classifyAddress lets public addresses through', () => {
  it.each([
    '8.8.8.8',
    '1.1.1.1',
    '93.184.215.14',
    '172.15.255.255',
    '172.32.0.0',
    '100.63.255.255',
    '100.128.0.0',
    '11.0.0.1',
    '223.255.255.255',
    '2606:4700:4700::1111',
    '2a00:1450:4001::200e',
    '::ffff:8.8.8.8',
    '64:ff9b::808:808',
    '2002:808:808::1',
  ])('%s', (address) => {
    expect(classifyAddress(address)).toBeUndefined();
  });
});

describe('classifyHostname', () => {
  it.each(['metadata.google.internal', 'metadata.goog', 'metadata', 'instance-data', 'instance-data.ec2.internal'])(
    'refuses the metadata name %s before any DNS query',
    (name) => {
      expect(classifyHostname(name)).toBe('cloud metadata');
    },
  );
  it.each(['example.com', 'metadata.example.com', 'localhost'])('leaves %s to the address check', (name) => {
    expect(classifyHostname(name)).toBeUndefined();
  });
});
