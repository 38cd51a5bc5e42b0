# syntax=docker/dockerfile:1
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/countersign ./cmd/countersign

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/countersign /usr/local/bin/countersign
USER nonroot:nonroot
VOLUME ["/data"]
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/countersign"]
# Dev mode by default: the sidecar with its simulated systems of record.
# In production pass --agent, --ledger, --orders, --issuer and --issuer-jwks instead of --dev.
CMD ["serve", "--dev", "--data", "/data", "--listen", "0.0.0.0:8080"]
