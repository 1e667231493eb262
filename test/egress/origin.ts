/**
 * A loopback origin for the sandbox egress suites: one HTTP server on 127.0.0.1 that is at once
 * a web page (`/hello`), a slow answer (`/slow?ms=N`), a git repository served over dumb HTTP
 * (`/git/repo.git/…`, after `git update-server-info`), an npm registry holding one package
 * (`/tiny-pkg` and its tarball) and, where the host has Python, a PyPI simple index holding one
 * wheel (`/simple/tiny-py/`). Names reach it through TOOLGATE_EGRESS_RESOLVE pins.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { promises as fs, readFileSync } from 'node:fs';
import * as http from 'node:http';
import type * as net from 'node:net';
import * as path from 'node:path';

export interface Origin {
  port: number;
  /** Requests seen, as `METHOD url`. */
  seen: string[];
  close(): Promise<void>;
}

const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.test', '-c', 'init.defaultBranch=main', ...args], { cwd, stdio: 'ignore' });

/** A bare repository with one commit (README: "hello from git"), ready for dumb HTTP. */
async function makeRepo(dir: string): Promise<string> {
  const work = path.join(dir, 'work');
  await fs.mkdir(work, { recursive: true });
  git(work, 'init', '-q');
  await fs.writeFile(path.join(work, 'README'), 'hello from git\n');
  git(work, 'add', 'README');
  git(work, 'commit', '-q', '-m', 'first');
  const bare = path.join(dir, 'repo.git');
  git(dir, 'clone', '-q', '--bare', work, bare);
  git(bare, 'update-server-info');
  return bare;
}

/** tiny-pkg 1.0.0 as a tarball, and its integrity strings. */
async function makePackage(dir: string): Promise<{ tarball: Buffer; integrity: string; shasum: string }> {
  const pkg = path.join(dir, 'pkg', 'package');
  await fs.mkdir(pkg, { recursive: true });
  await fs.writeFile(path.join(pkg, 'package.json'), JSON.stringify({ name: 'tiny-pkg', version: '1.0.0', main: 'index.js' }));
  await fs.writeFile(path.join(pkg, 'index.js'), "module.exports = 'tiny';\n");
  const file = path.join(dir, 'tiny-pkg-1.0.0.tgz');
  execFileSync('tar', ['czf', file, '-C', path.join(dir, 'pkg'), 'package']);
  const tarball = await fs.readFile(file);
  return {
    tarball,
    integrity: `sha512-${createHash('sha512').update(tarball).digest('base64')}`,
    shasum: createHash('sha1').update(tarball).digest('hex'),
  };
}

/** tiny_py 1.0.0 as a wheel (made with the host's Python's zipfile), or undefined without Python. */
function makeWheel(dir: string): { name: string; body: Buffer; sha256: string } | undefined {
  const name = 'tiny_py-1.0.0-py3-none-any.whl';
  const script = `
import base64, hashlib, sys, zipfile
files = {"tiny_py/__init__.py": "VALUE = 'tiny from pypi'\\n",
         "tiny_py-1.0.0.dist-info/METADATA": "Metadata-Version: 2.1\\nName: tiny-py\\nVersion: 1.0.0\\n",
         "tiny_py-1.0.0.dist-info/WHEEL": "Wheel-Version: 1.0\\nGenerator: toolgate-test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"}
record = "".join("%s,sha256=%s,%d\\n" % (n, base64.urlsafe_b64encode(hashlib.sha256(c.encode()).digest()).rstrip(b"=").decode(), len(c)) for n, c in files.items())
files["tiny_py-1.0.0.dist-info/RECORD"] = record + "tiny_py-1.0.0.dist-info/RECORD,,\\n"
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for n, c in files.items(): z.writestr(n, c)
`;
  try {
    execFileSync('python3', ['-c', script, path.join(dir, name)], { stdio: 'ignore' });
  } catch {
    return undefined;
  }
  const body = readFileSync(path.join(dir, name));
  return { name, body, sha256: createHash('sha256').update(body).digest('hex') };
}

/** `registryHost`: the name the packument's tarball URL uses (a pinned name). */
export async function startOrigin(dir: string, registryHost: string): Promise<Origin> {
  const repo = await makeRepo(dir);
  const pkg = await makePackage(dir);
  const wheel = makeWheel(dir);
  const seen: string[] = [];
  let port = 0;
  const server = http.createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    const url = new URL(req.url ?? '/', 'http://origin');
    if (url.pathname === '/hello') return void res.end('hello from the origin\n');
    if (url.pathname === '/slow') return void setTimeout(() => res.end('slow\n'), Number(url.searchParams.get('ms') ?? 1000));
    if (url.pathname === '/tiny-pkg') {
      const tarball = `http://${registryHost}:${port}/tiny-pkg/-/tiny-pkg-1.0.0.tgz`;
      res.setHeader('content-type', 'application/json');
      return void res.end(
        JSON.stringify({
          name: 'tiny-pkg',
          'dist-tags': { latest: '1.0.0' },
          versions: { '1.0.0': { name: 'tiny-pkg', version: '1.0.0', main: 'index.js', dist: { tarball, integrity: pkg.integrity, shasum: pkg.shasum } } },
        }),
      );
    }
    if (url.pathname === '/tiny-pkg/-/tiny-pkg-1.0.0.tgz') return void res.end(pkg.tarball);
    if (wheel && url.pathname === '/simple/tiny-py/') {
      res.setHeader('content-type', 'text/html');
      return void res.end(`<!DOCTYPE html><html><body><a href="/packages/${wheel.name}#sha256=${wheel.sha256}">${wheel.name}</a></body></html>\n`);
    }
    if (wheel && url.pathname === `/packages/${wheel.name}`) return void res.end(wheel.body);
    if (url.pathname.startsWith('/git/repo.git/')) {
      const file = path.join(repo, path.normalize(url.pathname.slice('/git/repo.git/'.length)));
      if (!file.startsWith(repo)) return void res.writeHead(404).end();
      return void fs.readFile(file).then(
        (body) => res.end(body),
        () => res.writeHead(404).end(),
      );
    }
    res.writeHead(404).end('not found\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as net.AddressInfo).port;
  return {
    port,
    seen,
    async close() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}
