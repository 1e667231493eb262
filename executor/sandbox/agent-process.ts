/** A sandbox agent run as a child process (directly, or wrapped by bwrap). */
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { AgentChannel, AgentConnection, AgentConnectionOptions } from './agent-connection';
import type { SandboxSpec } from './backend';

/**
 * The compiled agent entry point. From dist/ it sits beside this file's folder; when this file
 * runs from source (ts-jest), the agent still runs compiled, from dist/.
 */
export const AGENT_MAIN = __dirname.split(path.sep).includes('dist')
  ? path.resolve(__dirname, '../agent/main.js')
  : path.resolve(__dirname, '../../dist/executor/agent/main.js');

export interface AgentCommand {
  file: string;
  args: string[];
  /** The agent's complete environment: nothing of the server's own is passed on. */
  env: Record<string, string>;
}

export const AgentProcess = {
  /** Spawns the agent and waits until it answers. */
  start(command: AgentCommand, spec: SandboxSpec, options: Omit<AgentConnectionOptions, 'limits' | 'hostRoot'>): Promise<AgentConnection> {
    const child = spawn(command.file, command.args, { env: command.env, stdio: ['pipe', 'pipe', 'pipe'], cwd: spec.workspace });
    const exited = new Promise<string>((resolve) => {
      child.once('error', (err) => resolve(`could not be started: ${err.message}`));
      child.once('close', (code, signal) => resolve(signal ? `was killed by ${signal}` : `exited with code ${code}`));
    });
    const channel: AgentChannel = { stdout: child.stdout!, stdin: child.stdin!, stderr: child.stderr!, exited, kill: () => child.kill('SIGKILL') };
    return AgentConnection.open(channel, { ...options, limits: spec.limits, hostRoot: spec.workspace });
  },
};
