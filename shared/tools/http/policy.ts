/** What http_request may reach and how: the SSRF guard's allow-list and the defaults. Filled in by the HTTP tool. */
export interface HttpPolicy {
  /** Operator exceptions from TOOLGATE_HTTP_ALLOW: CIDRs and host:port entries, as given. */
  readonly allow: readonly string[];
}
