/**
 * A Git smart-HTTP server for tests: `git http-backend` run as a CGI per request, behind Basic
 * authentication (401 with a challenge first, as Git hosts answer), so a clone proves which
 * credentials reached the server.
 */
import { execFileSync, spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import type * as http from 'node:http';
import * as path from 'node:path';

/** Makes `<root>/repo.git` with one commit holding README. */
export async function makeRepo(root: string): Promise<void> {
  const work = path.join(root, 'work');
  await fs.mkdir(work, { recursive: true });
  const git = (...args: string[]) => execFileSync('git', args, { cwd: work, stdio: 'ignore', env: { PATH: process.env.PATH ?? '', HOME: root } });
  git('init', '-q', '-b', 'main');
  await fs.writeFile(path.join(work, 'README'), 'hello from the test repo\n');
  git('add', 'README');
  git('-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', 'first');
  execFileSync('git', ['clone', '-q', '--bare', work, path.join(root, 'repo.git')], { stdio: 'ignore' });
}

/** Answers a request under /repo.git when its Basic credentials are `user:password`. */
export function serveGit(root: string, password: string, req: http.IncomingMessage, res: http.ServerResponse): void {
  const auth = req.headers.authorization;
  if (!auth) {
    res.writeHead(401, { 'www-authenticate': 'Basic realm="git"', 'content-length': 0 });
    return void res.end();
  }
  if (Buffer.from(auth.replace(/^Basic /, ''), 'base64').toString() !== `user:${password}`) {
    res.writeHead(403, { 'content-length': 0 });
    return void res.end();
  }
  const url = new URL(req.url ?? '/', 'http://x');
  const cgi = spawn('git', ['http-backend'], {
    env: {
      PATH: process.env.PATH ?? '',
      GIT_PROJECT_ROOT: root,
      GIT_HTTP_EXPORT_ALL: '1',
      PATH_INFO: url.pathname,
      QUERY_STRING: url.search.slice(1),
      REQUEST_METHOD: req.method ?? 'GET',
      CONTENT_TYPE: req.headers['content-type'] ?? '',
      REMOTE_USER: 'user',
    },
  });
  req.pipe(cgi.stdin);
  const chunks: Buffer[] = [];
  cgi.stdout.on('data', (c: Buffer) => chunks.push(c));
  cgi.on('close', () => {
    const out = Buffer.concat(chunks);
    const end = out.indexOf('\r\n\r\n') !== -1 ? out.indexOf('\r\n\r\n') + 4 : out.indexOf('\n\n') + 2;
    const headers: Record<string, string> = {};
    let status = 200;
    for (const line of out.subarray(0, end).toString().split(/\r?\n/).filter(Boolean)) {
      const at = line.indexOf(':');
      const [name, value] = [line.slice(0, at).trim(), line.slice(at + 1).trim()];
      if (name.toLowerCase() === 'status') status = Number(value.split(' ')[0]);
      else headers[name] = value;
    }
    res.writeHead(status, headers);
    res.end(out.subarray(end));
  });
}
