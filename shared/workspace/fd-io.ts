/**
 * Moving bytes through raw descriptors. Small transfers are synchronous (cheaper than a
 * thread-pool round trip); large ones go to the thread pool so the event loop keeps turning
 * while megabytes move.
 */
import { read, readSync, write, writeSync } from 'node:fs';

const SYNC_BELOW = 64 * 1024;

function readOnce(fd: number, buf: Uint8Array, offset: number, length: number, position: number): Promise<number> {
  if (length < SYNC_BELOW) return Promise.resolve(readSync(fd, buf, offset, length, position));
  return new Promise((resolve, reject) => read(fd, buf, offset, length, position, (err, n) => (err ? reject(err) : resolve(n))));
}

/** True when a transfer of `bytes` is done synchronously (see above). */
export const isSmallTransfer = (bytes: number): boolean => bytes < SYNC_BELOW;

/** readFully for a small buffer (isSmallTransfer), without a promise per read. */
export function readFullySync(fd: number, buf: Uint8Array, position: number): number {
  let got = 0;
  while (got < buf.length) {
    const n = readSync(fd, buf, got, buf.length - got, position + got);
    if (n === 0) break; // the file ended (or shrank while we read)
    got += n;
  }
  return got;
}

/** Fills `buf` from `position` until it is full or the file ends; returns the bytes read. */
export async function readFully(fd: number, buf: Uint8Array, position: number): Promise<number> {
  let got = 0;
  while (got < buf.length) {
    const n = await readOnce(fd, buf, got, buf.length - got, position + got);
    if (n === 0) break; // the file ended (or shrank while we read)
    got += n;
  }
  return got;
}

/** Writes all of `bytes` at the descriptor's current position (or the end, with O_APPEND). */
export async function writeFully(fd: number, bytes: Uint8Array): Promise<void> {
  let done = 0;
  while (done < bytes.length) {
    const left = bytes.length - done;
    done +=
      left < SYNC_BELOW
        ? writeSync(fd, bytes, done, left)
        : await new Promise<number>((resolve, reject) => write(fd, bytes, done, left, null, (err, n) => (err ? reject(err) : resolve(n))));
  }
}
