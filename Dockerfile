# Build:  docker build --build-arg VERSION=$(git describe --tags --always) -t agent-worker .
# Run:    docker run -e AGENT_WORKER_API_TOKEN=$(openssl rand -hex 16) -p 8080:8080 agent-worker
#
# Base images are pinned by digest (multi-arch index digests, taken from
# public digest-pinned Dockerfiles as of 2026-08; refresh with
# `crane digest docker.io/library/golang:1.26` and
# `crane digest gcr.io/distroless/static-debian12:nonroot`), fully
# qualified so podman and buildah resolve them without a search list.
# The image runs as the distroless nonroot user (65532) and works with a
# read-only root: its state lives in /data, which exists and belongs to
# 65532 even without a mounted volume.
FROM docker.io/library/golang:1.26@sha256:3aff6657219a4d9c14e27fb1d8976c49c29fddb70ba835014f477e1c70636647 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/agent-worker ./cmd/agent-worker \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab
COPY --from=build /out/agent-worker /usr/local/bin/agent-worker
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
WORKDIR /data
ENV AGENT_WORKER_DATA_DIR=/data
EXPOSE 8080 4222
# distroless has no curl: the binary asks its own /readyz.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["/usr/local/bin/agent-worker", "health", "--api", "http://127.0.0.1:8080"]
ENTRYPOINT ["/usr/local/bin/agent-worker"]
CMD ["run"]
