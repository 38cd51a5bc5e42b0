# syntax=docker/dockerfile:1
#
# Two targets, one binary:
#
#   docker build -t countersign .                    the default (last) stage: production `serve`,
#                                                    which refuses to start until it is configured
#   docker build --target dev -t countersign:dev .   the dev stack: `serve --dev`, with a simulated
#                                                    ledger and order system and a sign-in page with
#                                                    a button per test lead; never expose it
#
# Configure production serve with COUNTERSIGN_* variables (one per flag:
# --issuer-jwks is COUNTERSIGN_ISSUER_JWKS) or a YAML file of the flags'
# names (COUNTERSIGN_CONFIG=/etc/countersign/countersign.yaml); secrets as
# mounted files (--store-file, --key-file, --notify-webhook-secret-file,
# --oidc-client-secret-file). `countersign config check FILE` lists a
# file's problems. The image listens on 0.0.0.0:8080 and keeps its state
# in the volume /data, owned by the non-root user 65532 that it runs as.
# cmd/countersign/dockerfile_test.go holds this file to all of that.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/countersign ./cmd/countersign
# distroless has no shell to mkdir or chown: /data is made here and copied
# with its owner, so a fresh volume at /data is writable by the user below.
RUN mkdir -p /data-skel

FROM gcr.io/distroless/static-debian12:nonroot AS runtime
COPY --from=build /out/countersign /usr/local/bin/countersign
COPY --from=build --chown=65532:65532 /data-skel /data
# The binary's own default listen address is loopback; in a container the
# sidecar must be reachable from outside it.
ENV COUNTERSIGN_LISTEN=0.0.0.0:8080
ENV COUNTERSIGN_DATA=/data
# Numeric, so that Kubernetes' runAsNonRoot can verify it: distroless's nonroot.
USER 65532:65532
VOLUME ["/data"]
EXPOSE 8080
# healthcheck asks /readyz on COUNTERSIGN_LISTEN: no shell, no curl. A
# production sidecar is unhealthy (503) until a bundle is active.
HEALTHCHECK CMD ["/usr/local/bin/countersign", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/countersign"]

# The dev stack, for trying countersign on a laptop: docker build --target dev.
FROM runtime AS dev
CMD ["serve", "--dev"]

# The default target: production serve.
FROM runtime AS production
CMD ["serve"]
