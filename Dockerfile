# entityd container image: built on Debian 12, run on Debian 12 slim as a non-root user.
#
#   docker build -t entityd .
#   docker run --rm -p 8080:8080 -e AUTH_SECRET="$(openssl rand -hex 32)" \
#     -e REDIS_URL=redis://redis.example:6379/0 entityd
#
# tests/integration/test_ops.py checks this file: the runtime stage must install the Debian
# package of every shared library the binary links (ldd + dpkg -S), the build stage the packages
# of scripts/lib.sh, and the build commands below are replayed on a copy of the build context.
# Pin both base images by digest (debian:bookworm@sha256:…) for reproducible releases.

# ---- build ------------------------------------------------------------------------------------
FROM debian:bookworm AS build

# The packages of ENTITYD_BUILD_PKGS in scripts/lib.sh; no test libraries (-Dtests=disabled).
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential meson ninja-build pkg-config python3 \
      libuv1-dev node-llhttp libhiredis-dev libsecp256k1-dev nettle-dev libjansson-dev \
      libcurl4-openssl-dev \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY . .
RUN meson setup build-release --buildtype=release -Dtests=disabled \
 && ninja -C build-release service/entityd \
 && build-release/service/entityd --version

# ---- runtime ----------------------------------------------------------------------------------
FROM debian:bookworm-slim AS runtime

# Only the shared libraries the binary links (libc6 is in the base image):
#   libuv.so.1 -> libuv1, libhiredis.so.0.14 -> libhiredis0.14, libsecp256k1.so.1 ->
#   libsecp256k1-1, libnettle.so.8 -> libnettle8, libjansson.so.4 -> libjansson4, libcurl.so.4 -> libcurl4
#   and the libraries libcurl links, listed too (ldd shows them; apt would pull them in anyway);
#   ca-certificates for an https ETH_RPC_URL.
# A fixed numeric user, so that Kubernetes' runAsNonRoot can verify it.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libuv1 libhiredis0.14 libsecp256k1-1 libnettle8 libjansson4 libcurl4 ca-certificates \
      libbrotli1 libcom-err2 libffi8 libgmp10 libgnutls30 libgssapi-krb5-2 libhogweed6 \
      libidn2-0 libk5crypto3 libkeyutils1 libkrb5-3 libkrb5support0 libldap-2.5-0 \
      libnghttp2-14 libp11-kit0 libpsl5 librtmp1 libsasl2-2 libssh2-1 libssl3 libtasn1-6 \
      libunistring2 libzstd1 zlib1g \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 entityd \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin entityd

COPY --from=build /src/build-release/service/entityd /usr/local/bin/entityd

LABEL org.opencontainers.image.title="entityd" \
      org.opencontainers.image.description="Organizations, members, skills and levels for wallet-signed callers" \
      org.opencontainers.image.licenses="MIT"

USER 10001:10001
ENV PORT=8080 \
    HOST=0.0.0.0
EXPOSE 8080

# entityd drains on SIGTERM: stops accepting, finishes requests in flight (SHUTDOWN_TIMEOUT_MS,
# 10 s by default), closes Redis and exits 0. It runs as PID 1 (exec form below), which is fine:
# it handles SIGTERM and SIGINT itself and starts no child processes.
STOPSIGNAL SIGTERM

# For plain docker / compose (Kubernetes ignores HEALTHCHECK and uses the manifest's probes).
# The slim image has no curl: bash's /dev/tcp sends GET /healthz and checks for a 200.
HEALTHCHECK --interval=30s --timeout=3s --start-period=5s --retries=3 \
  CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/${PORT:-8080} && printf 'GET /healthz HTTP/1.1\\r\\nHost: localhost\\r\\nConnection: close\\r\\n\\r\\n' >&3 && read -r -t 2 status <&3 && [[ $status == *' 200 '* ]]"]

ENTRYPOINT ["/usr/local/bin/entityd"]
