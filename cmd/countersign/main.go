// Command countersign is the policy-as-code sidecar for agents that move
// money, with the tools around it: the demo, the incident drill, bundle
// tooling, reconciliation, the audit check, the dev token issuer and the
// simulated systems of record.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "countersign:", err)
		os.Exit(exitCode(err))
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "countersign",
		Short:         "Authorize, execute exactly once and record the tool calls of agents that move money",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	bundle := newBundleCmd()
	bundle.AddCommand(newBundleImpactCmd())
	root.AddCommand(
		bundle,
		newDecisionsCmd(),
		newEffectivenessCmd(),
		newTokenCmd(),
		newSimCmd(),
		newServeCmd(),
		newConfigCmd(),
		newAuditCmd(),
		newReconcileCmd(),
		newShadowCmd(),
		newDemoCmd(),
		newDrillCmd(),
		newBenchCmd(),
		newMCPCmd(),
		newKeyfileCmd(),
		newVersionCmd(),
		newHealthcheckCmd(),
		newManifestsCmd(),
		newSimulateCmd(),
	)
	return root
}

// exitError carries a process exit code other than 1 (for example a failed
// gate, which is an answer rather than a crash).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	if e, ok := err.(*exitError); ok {
		return e.code
	}
	return 1
}

// printJSON writes v as indented JSON: the --json form of every report.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
