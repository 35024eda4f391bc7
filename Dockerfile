# Build: docker build -t agent-worker .
# The Helm chart (deploy/helm/agent-worker) runs this image as the
# distroless nonroot user (65532) with a read-only root and /data writable.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/agent-worker ./cmd/agent-worker

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/agent-worker /usr/local/bin/agent-worker
USER 65532:65532
WORKDIR /data
EXPOSE 8080 4222
ENTRYPOINT ["/usr/local/bin/agent-worker"]
CMD ["run"]
