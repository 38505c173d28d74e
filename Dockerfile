# sluice: one image with every command (ingest, drainer, demosink, and any
# other under cmd/), run as a non-root user on a distroless base.
#   docker build -t sluice:latest .
#   docker run --rm sluice:latest /usr/local/bin/ingest --config /etc/sluice/sluice.yaml
# docker-compose.yml and deploy/k8s pick the command per service.

FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# Static binaries (no cgo), without paths of the build machine.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/ ./cmd/...

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
# 65532:65532 is distroless's "nonroot"; Kubernetes' runAsNonRoot needs it numeric.
USER 65532:65532
# ingest, drainer, demosink (each listens where its flags or config say).
EXPOSE 8080 8081 9000
