package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/sidecar/devstack"
)

func newServeCmd() *cobra.Command {
	var (
		dev    bool
		data   string
		listen string
		bundle string
	)
	cmd := &cobra.Command{
		Use:   "serve --dev --data DIR",
		Short: "Run the sidecar (with --dev: with the ledger, the order system and a dev identity provider)",
		Long: `Run the countersign sidecar until SIGTERM or SIGINT, then shut down cleanly.

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
			if !dev {
				return errors.New("only --dev is available in this release: it runs the sidecar with the simulated systems of record; pass --dev")
			}
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
			opts := devstack.Options{DataDir: data, Listen: listen, Logger: log, Failpoint: fail, Controls: controls}
			if bundle != "" {
				b, err := policy.LoadPath(bundle)
				if err != nil {
					return fmt.Errorf("--bundle %s: %w", bundle, err)
				}
				opts.Bundle = b
			}
			st, err := devstack.Start(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if err := st.WriteFiles(data); err != nil {
				st.Close()
				return err
			}
			log.Info("countersign dev mode serving", "sidecar", st.Endpoints.Sidecar, "ledger", st.Endpoints.Ledger,
				"orders", st.Endpoints.Orders, "policy_revision", st.Policy.Revision(), "data", data)
			fmt.Fprintf(cmd.OutOrStdout(), "countersign sidecar on %s (tokens in %s/dev-tokens.json); SIGTERM to stop\n", st.Endpoints.Sidecar, data)
			<-cmd.Context().Done()
			log.Info("shutting down")
			return st.Close()
		},
	}
	cmd.Flags().BoolVar(&dev, "dev", false, "run with the simulated systems of record and the dev identity provider")
	cmd.Flags().StringVar(&data, "data", "", "data directory (state, keys, simulators)")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "sidecar listen address")
	cmd.Flags().StringVar(&bundle, "bundle", "", "policy bundle directory or .tar.gz to activate through the gate (default: the embedded p1)")
	return cmd
}
