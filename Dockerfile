# syntax=docker/dockerfile:1
#
# edge-mcp container image: a static binary on distroless, run as a non-root
# user, with a read-only root file system. See deploy/README.md.
#
#   docker build -t edge-mcp --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg COMMIT=$(git rev-parse HEAD) .
#   docker run --read-only -p 8080:8080 -v edge-mcp-state:/var/lib/edge-mcp \
#     -v $PWD/config.json:/etc/edge-mcp/config.json:ro edge-mcp
#
# Multi-platform: docker buildx build --platform linux/amd64,linux/arm64,linux/arm/v7 .
# The builder runs on the build machine's platform and cross-compiles.

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS=linux
ARG TARGETARCH
ARG TARGETVARIANT
ARG VERSION=dev
ARG COMMIT=unknown
WORKDIR /src
COPY . .
# The release flags of 'go tool task release': static, trimmed, stripped,
# version and commit linked in. TARGETVARIANT is "v7" for linux/arm/v7.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} GOARM=${TARGETVARIANT#v} \
    go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
      -o /out/edge-mcp ./cmd/edge-mcp \
 && mkdir -p /out/state/cache

FROM gcr.io/distroless/static:nonroot
ARG VERSION=dev
ARG COMMIT=unknown
LABEL org.opencontainers.image.title="edge-mcp" \
      org.opencontainers.image.description="A small, fast MCP gateway: one MCP endpoint in front of many MCP servers" \
      org.opencontainers.image.source="https://github.com/edge-mcp/edge-mcp" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}"
COPY --from=build /out/edge-mcp /usr/local/bin/edge-mcp
# The state directory (module store, tool pins, Wasm compilation cache) is
# the only place edge-mcp writes; it belongs to the nonroot user (65532).
COPY --from=build --chown=65532:65532 /out/state /var/lib/edge-mcp
USER 65532:65532
# os.UserCacheDir (the Wasm compilation cache) and HOME point into the
# volume, so the root file system can be mounted read-only.
ENV HOME=/var/lib/edge-mcp XDG_CACHE_HOME=/var/lib/edge-mcp/cache
VOLUME ["/var/lib/edge-mcp"]
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/edge-mcp"]
# Listens on every interface of the container: the config must set auth
# (auth.mode api_key or jwt), or edge-mcp refuses a non-loopback listener
# (unless auth.allow_unauthenticated). The admin API stays on the
# container's loopback unless the config or --admin says otherwise.
CMD ["serve", "--config", "/etc/edge-mcp/config.json", "--listen", "0.0.0.0:8080", "--state-dir", "/var/lib/edge-mcp"]
