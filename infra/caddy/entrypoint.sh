#!/bin/sh
# Starts Caddy for toolgate. The Caddyfile beside this script uses only variables this script
# derives after checking them, so a bad setting stops start-up here, with a sentence, instead of
# leaving a proxy that lets requests through (fail closed). POSIX sh: the public caddy:2 image
# is Alpine (busybox sh), the local stand-in Debian.
#
#   TOOLGATE_API_KEY          the API key clients send as X-API-Key (required)
#   TOOLGATE_API_KEYS         more accepted keys, comma- or space-separated (other clients, or
#                             the old and new key during a rotation; see docs/deployment.md)
#   TOOLGATE_MAX_MESSAGE_BYTES  largest request body (default 8388608, as the gateway's)
#   TOOLGATE_SITE_ADDRESS     the site address (default https://127.0.0.1:8443)
#   TOOLGATE_BIND             the interface to listen on (default 127.0.0.1)
#   TOOLGATE_UPSTREAM         the gateway (default 127.0.0.1:3000)
#   TOOLGATE_OAUTH_PATH       the gateway's OAuth endpoint (default /mcp): it and its RFC 9728
#                             metadata pass without an API key (the gateway checks OAuth tokens)
#   TOOLGATE_TLS              internal (Caddy's own CA, the default) | files
#   TOOLGATE_TLS_CERT_FILE, TOOLGATE_TLS_KEY_FILE   PEM files, for TOOLGATE_TLS=files
#   XDG_DATA_HOME             Caddy's data directory (default /data); every file Caddy writes
#                             (certificates, its CA, autosave) stays under it
set -eu
set -f # keys are split on commas and spaces below: never expand them as file names

fail() {
  echo "toolgate caddy: $*" >&2
  exit 64
}

# --- API keys -> one anchored alternation. Keys are restricted to [A-Za-z0-9_-] so none can
# carry a regex metacharacter, a space (which would split the Caddyfile token) or a '*'.
pattern=''
count=0
for key in $(printf '%s' "${TOOLGATE_API_KEY:-} ${TOOLGATE_API_KEYS:-}" | tr ',' ' '); do
  case $key in
    *[!A-Za-z0-9_-]*) fail "an API key contains a character outside [A-Za-z0-9_-] (key number $((count + 1)))" ;;
  esac
  [ "${#key}" -ge 16 ] || fail "an API key is shorter than 16 characters (key number $((count + 1))); use e.g. openssl rand -hex 32"
  [ "${#key}" -le 256 ] || fail "an API key is longer than 256 characters (key number $((count + 1)))"
  pattern="${pattern:+$pattern|}$key"
  count=$((count + 1))
done
[ -n "${TOOLGATE_API_KEY:-}" ] || fail "TOOLGATE_API_KEY is not set: refusing to start a proxy without an API key"
TOOLGATE_API_KEY_PATTERN="^(?:$pattern)\$"
unset TOOLGATE_API_KEY TOOLGATE_API_KEYS key pattern

# --- Body limit -> a regex matching every Content-Length above it (Caddy has no numeric
# comparison; request_body alone answers an oversize body with 502, so it is refused up front).
max=${TOOLGATE_MAX_MESSAGE_BYTES:-8388608}
case $max in '' | *[!0-9]* | 0*) fail "TOOLGATE_MAX_MESSAGE_BYTES must be a positive whole number, got \"$max\"" ;; esac
[ "${#max}" -le 15 ] || fail "TOOLGATE_MAX_MESSAGE_BYTES is too large: $max"
digits() { # $1 times [0-9]
  out=''
  n=$1
  while [ "$n" -gt 0 ]; do out="$out[0-9]"; n=$((n - 1)); done
  printf '%s' "$out"
}
len=${#max}
# Longer numbers (no leading zeros), then same-length numbers that are larger at digit i.
above="[1-9]$(digits "$len")[0-9]*"
prefix=''
rest=$max
i=0
while [ "$i" -lt "$len" ]; do
  d=${rest%"${rest#?}"}
  rest=${rest#?}
  [ "$d" -lt 9 ] && above="$above|$prefix[$((d + 1))-9]$(digits $((len - i - 1)))"
  prefix="$prefix$d"
  i=$((i + 1))
done
TOOLGATE_OVERSIZE_PATTERN="^0*(?:$above)\$"
TOOLGATE_MAX_MESSAGE_BYTES=$max

# --- Where and how to listen.
TOOLGATE_SITE_ADDRESS=${TOOLGATE_SITE_ADDRESS:-https://127.0.0.1:8443}
TOOLGATE_BIND=${TOOLGATE_BIND:-127.0.0.1}
TOOLGATE_UPSTREAM=${TOOLGATE_UPSTREAM:-127.0.0.1:3000}
for v in "$TOOLGATE_SITE_ADDRESS" "$TOOLGATE_BIND" "$TOOLGATE_UPSTREAM"; do
  case $v in *[!A-Za-z0-9_.:/\[\]-]*) fail "a listen or upstream address has an unexpected character: \"$v\"" ;; esac
done
case $TOOLGATE_SITE_ADDRESS in https://*) ;; *) fail "TOOLGATE_SITE_ADDRESS must start with https:// (got \"$TOOLGATE_SITE_ADDRESS\")" ;; esac

# --- The OAuth endpoint: one path of letters, digits, '.', '_', '~', '-' segments, never / itself
# (that would open POST / without the key).
TOOLGATE_OAUTH_PATH=${TOOLGATE_OAUTH_PATH:-/mcp}
case $TOOLGATE_OAUTH_PATH in
  / | *//* | */ | *[!A-Za-z0-9._~/-]* | [!/]*) fail "TOOLGATE_OAUTH_PATH must be a path such as /mcp (not /), got \"$TOOLGATE_OAUTH_PATH\"" ;;
esac

TOOLGATE_TLS=${TOOLGATE_TLS:-internal}
case $TOOLGATE_TLS in
  internal) ;;
  files)
    for f in "${TOOLGATE_TLS_CERT_FILE:-}" "${TOOLGATE_TLS_KEY_FILE:-}"; do
      [ -n "$f" ] || fail "TOOLGATE_TLS=files needs TOOLGATE_TLS_CERT_FILE and TOOLGATE_TLS_KEY_FILE"
      [ -r "$f" ] || fail "cannot read the TLS file $f"
      case $f in *[!A-Za-z0-9_./-]*) fail "a TLS file path has an unexpected character: \"$f\"" ;; esac
    done
    ;;
  *) fail "TOOLGATE_TLS must be internal or files, got \"$TOOLGATE_TLS\"" ;;
esac

# --- Caddy writes only under its data directory: certificates and its CA (storage), and the
# autosave it writes even with the admin API off (XDG_CONFIG_HOME).
XDG_DATA_HOME=${XDG_DATA_HOME:-/data}
XDG_CONFIG_HOME=$XDG_DATA_HOME/config
HOME=$XDG_DATA_HOME
mkdir -p "$XDG_DATA_HOME/caddy" "$XDG_CONFIG_HOME" || fail "cannot write to the data directory $XDG_DATA_HOME"

export TOOLGATE_API_KEY_PATTERN TOOLGATE_OVERSIZE_PATTERN TOOLGATE_MAX_MESSAGE_BYTES TOOLGATE_SITE_ADDRESS \
  TOOLGATE_BIND TOOLGATE_UPSTREAM TOOLGATE_TLS TOOLGATE_OAUTH_PATH XDG_DATA_HOME XDG_CONFIG_HOME HOME
echo "toolgate caddy: $TOOLGATE_SITE_ADDRESS on $TOOLGATE_BIND -> $TOOLGATE_UPSTREAM, TLS $TOOLGATE_TLS, $count API key(s), OAuth endpoint $TOOLGATE_OAUTH_PATH without a key, bodies up to $max bytes" >&2
exec caddy run --config "${TOOLGATE_CADDYFILE:-$(dirname "$0")/Caddyfile}" --adapter caddyfile
