/**
 * A transport moves whole frames (one JSON text each) between two peers. It knows nothing of
 * JSON-RPC: parsing, dispatch and error translation happen above it, so every transport
 * behaves the same. Implementations: stdio (newline-delimited) and in-memory (tests); HTTP is
 * the gateway's.
 */
export interface Transport {
  /** Begins delivering frames to `onmessage`. */
  start(): Promise<void>;
  /** Sends one frame. */
  send(frame: string): Promise<void>;
  /** Stops reading and releases the streams; `onclose` fires once. */
  close(): Promise<void>;

  /** One complete frame arrived. */
  onmessage?: (frame: string) => void;
  /** The peer stopped sending (EOF) or close() was called. Until close(), send() still works. */
  onclose?: () => void;
  /** A frame could not be delivered (e.g. it exceeded the size limit); the transport keeps going. */
  onerror?: (error: Error) => void;
}

/** A frame was larger than the transport's limit and was discarded. */
export class FrameTooLargeError extends Error {
  override readonly name = 'FrameTooLargeError';
  constructor(readonly limit: number) {
    super(`message larger than the limit of ${limit} bytes`);
  }
}
