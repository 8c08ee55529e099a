# syntax=docker/dockerfile:1
#
# The elasti-resolver image. It is the image `make images` builds without a
# Docker engine (test/cluster/images.go): one static binary at /resolver, run as
# the unprivileged user 65532:65532, with the binary as the entrypoint.
# build/dockerfiles_test.go keeps the two in step.
#
# Build from the repository root:
#   docker build -f build/resolver.Dockerfile -t elasti/resolver:dev .

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS=linux
ARG TARGETARCH=amd64
WORKDIR /src
ENV GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0
# Dependencies first, so that a source change reuses the module download layer.
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
RUN GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w" -o /out/resolver ./cmd/elasti-resolver

# distroless/static has no shell or package manager, but does carry CA
# certificates, tzdata and a writable /tmp.
FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/resolver /resolver
USER 65532:65532
WORKDIR /
ENTRYPOINT ["/resolver"]
