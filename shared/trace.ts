/** W3C trace context (https://www.w3.org/TR/trace-context/) as a call carries it across processes. */
export interface TraceContext {
  traceparent?: string;
  tracestate?: string;
}
