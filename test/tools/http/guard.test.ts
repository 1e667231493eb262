/**
 * vetDestination: the decision the guard makes at connect time, with a fake resolver so that
 * names can point at private and public addresses without any DNS query or connection.
 */
import { normalizeHost, RefusedDestination, vetDestination } from '../../../shared/tools/http/guard';
import { createHttpPolicy, ResolvedAddress } from '../../../shared/tools/http/policy';

function fakeDns(table: Record<string, string[]>) {
  const asked: string[] = [];
  const resolve = async (host: string): Promise<ResolvedAddress[]> => {
    asked.push(host);
    const addresses = table[host];
    if (!addresses) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  return { resolve, asked };
}

const dns = () =>
  fakeDns({
    'public.test': ['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'],
    'rebind.test': ['127.0.0.1'],
    'mixed.test': ['93.184.215.14', '10.0.0.5'],
    'mapped.test': ['::ffff:169.254.169.254'],
    'metadata.test': ['169.254.169.254'],
    'v6local.test': ['fd00::1'],
    'empty.test': [],
  });

describe('vetDestination', () => {
  it('returns every address of a public name, in order, without connecting', async () => {
    const { resolve } = dns();
    await expect(vetDestination(createHttpPolicy([], { resolve }), 'public.test', 443)).resolves.toEqual([
      '93.184.215.14',
      '2606:2800:21f:cb07:6820:80da:af6b:8b2c',
    ]);
  });

  it('checks the resolved address, not the name: a name pointing at loopback is refused', async () => {
    const { resolve } = dns();
    await expect(vetDestination(createHttpPolicy([], { resolve }), 'rebind.test', 80)).rejects.toThrow(
      'Refused: rebind.test resolves to 127.0.0.1 (loopback), which is not allowed; operators can allow it with TOOLGATE_HTTP_ALLOW',
    );
  });

  it('refuses a name when any of its addresses is forbidden', async () => {
    const { resolve } = dns();
    const err = await vetDestination(createHttpPolicy([], { resolve }), 'mixed.test', 80).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RefusedDestination);
    expect((err as Error).message).toContain('10.0.0.5 (private)');
  });

  it.each([
    ['mapped.test', 'cloud metadata, as IPv4-mapped 169.254.169.254'],
    ['metadata.test', '169.254.169.254 (cloud metadata)'],
    ['v6local.test', 'fd00::1 (unique-local)'],
  ])('refuses %s', async (name, expected) => {
    const { resolve } = dns();
    await expect(vetDestination(createHttpPolicy([], { resolve }), name, 80)).rejects.toThrow(expected);
  });

  it('refuses metadata host names without asking DNS', async () => {
    const { resolve, asked } = dns();
    await expect(vetDestination(createHttpPolicy([], { resolve }), 'metadata.google.internal', 80)).rejects.toThrow(
      'Refused: metadata.google.internal is a cloud metadata host name',
    );
    await expect(vetDestination(createHttpPolicy([], { resolve }), 'METADATA.google.internal.', 80)).rejects.toThrow(RefusedDestination);
    expect(asked).toEqual([]);
  });

  it('refuses literal addresses without asking DNS', async () => {
    const { resolve, asked } = dns();
    const policy = createHttpPolicy([], { resolve });
    await expect(vetDestination(policy, '10.0.0.1', 80)).rejects.toThrow('Refused: 10.0.0.1 (private) is not allowed');
    await expect(vetDestination(policy, '[fe80::1]', 80)).rejects.toThrow('Refused: fe80::1 (link-local) is not allowed');
    await expect(vetDestination(policy, '8.8.8.8', 80)).resolves.toEqual(['8.8.8.8']);
    expect(asked).toEqual([]);
  });

  it('lets an allowed CIDR through, and only that range', async () => {
    const { resolve } = dns();
    const policy = createHttpPolicy(['10.0.0.0/24'], { resolve });
    await expect(vetDestination(policy, 'mixed.test', 80)).resolves.toEqual(['93.184.215.14', '10.0.0.5']);
    await expect(vetDestination(policy, '10.0.1.1', 80)).rejects.toThrow(RefusedDestination);
  });

  it('lets a name:port entry through for that name and port only', async () => {
    const { resolve } = dns();
    const policy = createHttpPolicy(['rebind.test:8080'], { resolve });
    await expect(vetDestination(policy, 'rebind.test', 8080)).resolves.toEqual(['127.0.0.1']);
    await expect(vetDestination(policy, 'rebind.test', 8081)).rejects.toThrow(RefusedDestination);
    await expect(vetDestination(policy, '127.0.0.1', 8080)).rejects.toThrow(RefusedDestination);
  });

  it('lets an ip:port entry through for any name resolving to that address, on that port', async () => {
    const { resolve } = dns();
    const policy = createHttpPolicy(['127.0.0.1:8080'], { resolve });
    await expect(vetDestination(policy, 'rebind.test', 8080)).resolves.toEqual(['127.0.0.1']);
    await expect(vetDestination(policy, '127.0.0.1', 8080)).resolves.toEqual(['127.0.0.1']);
    await expect(vetDestination(policy, '127.0.0.1', 8081)).rejects.toThrow(RefusedDestination);
  });

  it('reports a name that does not resolve', async () => {
    const { resolve } = dns();
    const policy = createHttpPolicy([], { resolve });
    await expect(vetDestination(policy, 'nowhere.test', 80)).rejects.toThrow('Could not resolve nowhere.test (ENOTFOUND)');
    await expect(vetDestination(policy, 'empty.test', 80)).rejects.toThrow('Could not resolve empty.test: no addresses');
  });
});

describe('normalizeHost', () => {
  it.each([
    ['[::1]', '::1'],
    ['LocalHost', 'localhost'],
    ['example.com.', 'example.com'],
  ])('%s → %s', (input, output) => {
    expect(normalizeHost(input)).toBe(output);
  });
});
