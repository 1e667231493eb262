/**
 * A started container as the agent's channel: attached before it starts (so no byte of output,
 * nor an early death, is missed), its stdout and stderr demultiplexed, its end told as a
 * sentence; and dockerd's errors turned into sentences an operator can act on.
 */
import type Docker from 'dockerode';
import { Duplex, PassThrough } from 'node:stream';

const MIB = 1024 * 1024;

export interface RunningContainer {
  stdin: Duplex;
  stdout: PassThrough;
  stderr: PassThrough;
  /** Resolves once the container has stopped, with a sentence saying how. */
  exited: Promise<string>;
}

/** Attaches, then starts. `memoryBytes`: the limit an out-of-memory death is reported with. */
export async function attachAndStart(docker: Docker, container: Docker.Container, memoryBytes: number): Promise<RunningContainer> {
  const stream = (await container.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true })) as Duplex;
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  docker.modem.demuxStream(stream, stdout, stderr);
  let open = true;
  const ended = () => {
    if (!open) return;
    open = false;
    stdout.end();
    stderr.end();
  };
  stream.once('end', ended);
  stream.once('close', ended);
  stream.on('error', () => undefined); // a broken connection shows as the container's exit
  try {
    await container.start();
  } catch (err) {
    stream.destroy();
    throw err;
  }
  const exited = container
    .wait({ condition: 'not-running' })
    .then(
      async (result: { StatusCode?: number }) => exitSentence(await container.inspect().catch(() => undefined), result.StatusCode, memoryBytes),
      (err: unknown) => {
        container.kill({ signal: 'SIGKILL' }).catch(() => undefined);
        return `was lost: the docker daemon stopped answering (${dockerMessage(err)})`;
      },
    )
    .finally(() => stream.destroy());
  return { stdin: stream, stdout, stderr, exited };
}

function exitSentence(info: Docker.ContainerInspectInfo | undefined, status: number | undefined, memoryBytes: number): string {
  if (info?.State.OOMKilled) return `was killed by the out-of-memory killer (the sandbox's memory limit is ${memoryBytes / MIB} MiB)`;
  const code = info?.State.ExitCode ?? status;
  if (code !== undefined && code > 128 && code < 160) return `was killed by signal ${code - 128}`;
  return `exited with code ${code ?? 'unknown'}`;
}

export function dockerMessage(err: unknown): string {
  const e = err as { json?: { message?: string }; message?: string } | undefined;
  return (e?.json?.message ?? e?.message ?? String(err)).trim();
}

export function describeCreateError(err: unknown, image: string): string {
  const e = err as { statusCode?: number; code?: string } | undefined;
  if (e?.code === 'ENOENT' || e?.code === 'ECONNREFUSED' || e?.code === 'EACCES') {
    return `the docker sandbox backend cannot reach the Docker daemon (${e.code}): is dockerd running, and may this user use its socket?`;
  }
  if (e?.statusCode === 404 && /image/i.test(dockerMessage(err))) {
    return `the sandbox image ${image} is not on this Docker host: build it with \`npm run sandbox:image\``;
  }
  return `the sandbox container could not be created: ${dockerMessage(err)}`;
}
