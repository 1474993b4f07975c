# disque-server container image: a static binary in an empty (scratch)
# image, running as UID/GID 10001, data (AOF, nodes.conf) under /data.
# docs/DEPLOY.md describes both ways to build it:
#
# * With a registry (BuildKit, the default builder of current Docker):
#       docker build -t disque-rs .
#   builds the binary in the `build` stage and copies it into `runtime`.
#
# * Without a registry (no base image can be pulled):
#       scripts/docker-image.sh
#   builds the static binary on the host and runs
#       docker build --target prebuilt -f Dockerfile <context>
#   on a context holding only that binary and an empty data/ directory.
#   `prebuilt` is the first stage, so even the legacy builder (which
#   builds every stage up to the target) never needs the Rust image.

# ---- no registry: the binary comes from the build context -------------
FROM scratch AS prebuilt
COPY --chown=10001:10001 disque-server /disque-server
COPY --chown=10001:10001 data/ /data/
USER 10001:10001
WORKDIR /data
VOLUME ["/data"]
EXPOSE 7711 17711 7780
# Ready = INFO readiness says ready:1: the same definition as /readyz
# (AOF loaded, cluster joined, a peer reachable). The binary is its own
# probe: the image has no shell, curl or redis-cli. With requirepass,
# give the probe DISQUE_PASSWORD. 7780 is the HTTP endpoint's port in
# deploy/ (off unless --http-port is given).
HEALTHCHECK --interval=5s --timeout=4s --start-period=10s --retries=3 \
    CMD ["/disque-server", "--healthcheck"]
ENTRYPOINT ["/disque-server"]
# protected-mode is off because clients reach the node through the
# container network; set requirepass (and TLS) for untrusted networks.
CMD ["--dir", "/data", "--appendonly", "yes", "--protected-mode", "no"]

# ---- with a registry: build the static binary in a Rust image ----------
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN RUSTFLAGS='-C target-feature=+crt-static' \
        cargo build --release --locked --target x86_64-unknown-linux-gnu --bin disque-server \
    && mkdir -p /out/data \
    && strip -o /out/disque-server target/x86_64-unknown-linux-gnu/release/disque-server

FROM scratch AS runtime
COPY --from=build --chown=10001:10001 /out/ /
USER 10001:10001
WORKDIR /data
VOLUME ["/data"]
EXPOSE 7711 17711 7780
HEALTHCHECK --interval=5s --timeout=4s --start-period=10s --retries=3 \
    CMD ["/disque-server", "--healthcheck"]
ENTRYPOINT ["/disque-server"]
CMD ["--dir", "/data", "--appendonly", "yes", "--protected-mode", "no"]
