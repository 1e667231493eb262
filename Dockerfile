# toolgate's service image: the gateway (`toolgate serve`) and the executor (`toolgate executor`)
# from one image, with `toolgate` and `generate-token` on the PATH.
#
#   docker build -t toolgate:local .
#   docker build -t toolgate:local --build-arg NODE_IMAGE=local/node:24-bookworm-slim \
#                --build-arg NODE_BUILD_IMAGE=local/node:24-bookworm --network host .
#
# Two stages: `build` installs every dependency (TypeScript, a compiler for the node-pty addon)
# and compiles; the final image gets only the compiled code and the production dependencies,
# owned by root and run as the unprivileged `node` user. The executor's compose service adds
# what starting sandbox containers needs (see docker-compose.yml and docs/deployment.md).
ARG NODE_BUILD_IMAGE=node:24-bookworm
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_BUILD_IMAGE} AS build
WORKDIR /src
ENV npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
COPY package.json package-lock.json ./
# Extra CA certificates for the registries, when a TLS-intercepting proxy stands between the
# build and the npm registry (infra/build-ca/README.md). Usually the folder holds nothing.
COPY infra/build-ca/ /tmp/build-ca/
# node-pty compiles against Node's headers. The public node images carry them in
# /usr/local/include/node; an image without them (the offline stand-ins) gets Debian's
# libnode-dev instead: node-pty uses only Node-API, whose ABI is the same across Node versions.
RUN set -eu; \
    if [ -f /usr/local/include/node/node_api.h ]; then nodedir=/usr/local; \
    else \
      apt-get update -qq; \
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends libnode-dev >/dev/null; \
      nodedir=/usr; \
    fi; \
    if ls /tmp/build-ca/*.crt >/dev/null 2>&1; then \
      cat /etc/ssl/certs/ca-certificates.crt /tmp/build-ca/*.crt > /tmp/build-ca/bundle.pem; \
      echo 'cafile=/tmp/build-ca/bundle.pem' >> ~/.npmrc; \
    fi; \
    export npm_config_nodedir=$nodedir; \
    # npm ci, so the image gets exactly the locked tree. npm 10/11 refuse a lock that lacks other
    # platforms' optional packages (npm/cli#4828); npm install then installs the same locked
    # versions and only resolves what the lock lacks, with a warning. Scripts are off: the
    # package's own `prepare` (the build) needs the sources, copied below; node-pty's addon, the
    # one install script we need, is built by the rebuild after.
    npm ci --no-audit --no-fund --ignore-scripts || { \
      echo 'Dockerfile: WARNING: npm ci refused package-lock.json (above); using npm install with the lock' >&2; \
      npm install --no-audit --no-fund --no-save --ignore-scripts; }; \
    npm rebuild node-pty
COPY tsconfig.json tsconfig.build.json ./
COPY shared shared
COPY gateway gateway
COPY executor executor
COPY shim shim
COPY bin bin
RUN set -eu; \
    npx tsc -p tsconfig.build.json; \
    find dist -name '*.map' -delete; \
    chmod 0755 dist/bin/toolgate.js dist/bin/generate-token.js; \
    npm prune --omit=dev --no-audit --no-fund; \
    # Keep node-pty's addon, drop its object files and sources.
    rm -rf node_modules/node-pty/build/Release/obj.target node_modules/node-pty/build/Release/.deps \
           node_modules/node-pty/deps node_modules/node-pty/src node_modules/node-pty/build/node_gyp_bins

FROM ${NODE_IMAGE}
ENV NODE_ENV=production \
    TOOLGATE_DATA_DIR=/var/lib/toolgate
WORKDIR /app
COPY --from=build /src/package.json ./package.json
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
# The code stays root-owned (read-only to the service); the data directory is the service's.
RUN ln -s /app/dist/bin/toolgate.js /usr/local/bin/toolgate \
 && ln -s /app/dist/bin/generate-token.js /usr/local/bin/generate-token \
 && mkdir -p /var/lib/toolgate \
 && chown node:node /var/lib/toolgate \
 && chmod 0700 /var/lib/toolgate
USER node
# The gateway's V8 heap sizes (bin/node-flags.ts; docs/deployment.md, "Memory"): they keep it
# under 100 MiB RSS under load. `toolgate executor` (docker-compose.yml) runs with V8's defaults.
CMD ["node", "--max-semi-space-size=4", "--heap-growing-percent=20", "/app/dist/bin/toolgate.js", "serve"]
