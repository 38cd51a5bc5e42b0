package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/sidecar/authn"
)

func newServeCmd() *cobra.Command {
	var (
		dev        bool
		data       string
		listen     string
		bundle     string
		ledgerURL  string
		ordersURL  string
		issuer     string
		issuerJWKS string
		policyTime time.Duration
	)
	cmd := &cobra.Command{
		Use:   "serve (--dev | --ledger URL --orders URL --issuer NAME --issuer-jwks URL|FILE) --data DIR",
		Short: "Run the sidecar (with --dev: with the ledger, the order system and a dev identity provider)",
		Long: `Run the countersign sidecar until SIGTERM or SIGINT, then shut down cleanly.

Without --dev it talks to the ledger and the order system at --ledger and
--orders, trusts people's tokens from --issuer signed with the keys at
--issuer-jwks (an https URL, refreshed, or a file), and stays not ready
(503) until an operator activates a bundle through the gate
(POST /v1/bundles) or --bundle names one. The systems of record must verify
actor tokens against this sidecar's /.well-known/jwks.json.

With --dev it also starts the simulated ledger and order system and the dev
identity provider on loopback ports, loads the embedded bundle p1 (or
--bundle PATH) and the Quillfeather fixture, and writes DIR/dev-endpoints.json
and DIR/dev-tokens.json (a bearer token valid 24 h for every fixture person).
All state stays under DIR: a restarted sidecar finds the ledger, the order
system and its workflows as they were.`,
		Example: `  countersign serve --dev --data /tmp/cs
  curl -s -H "Authorization: Bearer $(jq -r '."rep-ana"' /tmp/cs/dev-tokens.json)" \
    "$(jq -r .sidecar /tmp/cs/dev-endpoints.json)/v1/tools"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if data == "" {
				return errors.New("--data DIR is required: the sidecar keeps its state there")
			}
			log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			// Both are nil unless the binary was built with -tags failpoints
			// (the crash tests): see failpoint.go.
			fail, err := failpointHook(log)
			if err != nil {
				return err
			}
			controls, err := removedControls(log)
			if err != nil {
				return err
			}
			opts := devstack.Options{DataDir: data, Listen: listen, Logger: log, Failpoint: fail, Controls: controls, Background: true,
				PolicyTimeout: policyTime}
			if !dev {
				ext, err := externalSystems(ledgerURL, ordersURL, issuer, issuerJWKS)
				if err != nil {
					return err
				}
				opts.External = ext
			}
			if bundle != "" {
				b, err := policy.LoadPath(bundle)
				if err != nil {
					return fmt.Errorf("--bundle %s: %w", bundle, err)
				}
				opts.Bundle = b
			}
			st, err := devstack.Start(cmd.Context(), opts)
			if err != nil {
				return withFlagAdvice(err)
			}
			log.Info("countersign serving", "dev", dev, "sidecar", st.Endpoints.Sidecar, "ledger", st.Endpoints.Ledger,
				"orders", st.Endpoints.Orders, "policy_revision", st.Policy.Revision(), "data", data)
			if dev {
				if err := st.WriteFiles(data); err != nil {
					st.Close()
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "countersign sidecar on %s (tokens in %s/dev-tokens.json); SIGTERM to stop\n", st.Endpoints.Sidecar, data)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "countersign sidecar on %s; SIGTERM to stop\n", st.Endpoints.Sidecar)
			}
			<-cmd.Context().Done()
			log.Info("shutting down")
			return st.Close()
		},
	}
	cmd.Flags().BoolVar(&dev, "dev", false, "run with the simulated systems of record and the dev identity provider")
	cmd.Flags().StringVar(&data, "data", "", "data directory (state, keys, simulators)")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "sidecar listen address")
	cmd.Flags().StringVar(&bundle, "bundle", "", "policy bundle directory or .tar.gz to activate through the gate (dev default: the embedded p1)")
	cmd.Flags().StringVar(&ledgerURL, "ledger", "", "the ledger's base URL (without --dev)")
	cmd.Flags().StringVar(&ordersURL, "orders", "", "the order system's base URL (without --dev)")
	cmd.Flags().StringVar(&issuer, "issuer", "", "the iss of trusted people's tokens (without --dev)")
	cmd.Flags().DurationVar(&policyTime, "policy-timeout", policy.DefaultTimeout, "deadline of each policy evaluation; past it the call fails closed with 503 policy_timeout")
	cmd.Flags().StringVar(&issuerJWKS, "issuer-jwks", "", "the issuer's JWKS: an http(s) URL or a file (without --dev)")
	return cmd
}

// withFlagAdvice adds to a start-up problem a person fixes which flag to
// change, keeping it one line.
func withFlagAdvice(err error) error {
	var se *devstack.StartError
	if !errors.As(err, &se) {
		return err
	}
	switch se.Kind {
	case devstack.ErrAddrInUse:
		return fmt.Errorf("%w: stop it or pass --listen with another address", err)
	case devstack.ErrDataDirLocked:
		return fmt.Errorf("%w: stop it or pass --data with another directory", err)
	}
	return fmt.Errorf("%w: pass --data with a directory this user can write", err)
}

// externalSystems checks the production flags, reporting every problem at once.
func externalSystems(ledgerURL, ordersURL, issuer, jwks string) (*devstack.External, error) {
	var problems []error
	for _, f := range []struct{ flag, v string }{{"--ledger", ledgerURL}, {"--orders", ordersURL}} {
		flag, v := f.flag, f.v
		u, err := url.Parse(v)
		if v == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			problems = append(problems, fmt.Errorf("%s must be the http(s) base URL of the system (got %q)", flag, v))
		}
	}
	if issuer == "" {
		problems = append(problems, errors.New("--issuer must name the iss of people's tokens"))
	}
	is := authn.Issuer{Name: issuer}
	switch {
	case strings.HasPrefix(jwks, "http://") || strings.HasPrefix(jwks, "https://"):
		is.JWKSURL = jwks
	case jwks != "":
		is.JWKSFile = jwks
	default:
		problems = append(problems, errors.New("--issuer-jwks must be the issuer's JWKS URL or file"))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("serve without --dev: %w (or pass --dev to run with the simulated systems)", errors.Join(problems...))
	}
	return &devstack.External{LedgerURL: ledgerURL, OrdersURL: ordersURL, Issuers: []authn.Issuer{is}}, nil
}
