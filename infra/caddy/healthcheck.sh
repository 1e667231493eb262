#!/bin/sh
# Compose health check for Caddy: is it accepting connections on its HTTPS port? The admin API
# is off and the two images differ (the public caddy:2 is Alpine, with busybox nc; the local
# stand-in is Debian, with bash), so this checks the TCP port with whichever tool is there.
set -eu
site=${TOOLGATE_SITE_ADDRESS:-https://127.0.0.1:8443}
hostport=${site#https://}
hostport=${hostport%%/*}
case $hostport in
  *\]:*) port=${hostport##*:} ;;
  \[*) port=443 ;;
  *:*) port=${hostport##*:} ;;
  *) port=443 ;;
esac
host=${TOOLGATE_BIND:-127.0.0.1}
case $host in 0.0.0.0 | '') host=127.0.0.1 ;; '::' | '[::]') host=::1 ;; esac
if command -v nc >/dev/null 2>&1; then
  exec nc -z -w 2 "$host" "$port"
elif command -v bash >/dev/null 2>&1; then
  exec bash -c 'exec 3<>"/dev/tcp/$1/$2"' check "$host" "$port"
fi
echo "healthcheck: neither nc nor bash in this image" >&2
exit 1
