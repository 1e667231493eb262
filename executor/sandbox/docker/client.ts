/** The one file that loads dockerode (the others import its types only). */
import Docker from 'dockerode';

/** A client of dockerd at `socketPath`; default: DOCKER_HOST, else /var/run/docker.sock. */
export function dockerClient(socketPath?: string): Docker {
  return socketPath ? new Docker({ socketPath }) : new Docker();
}
