package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/countersign/countersign/cmd/stack"
	"github.com/countersign/countersign/executor/store"
)

func newBundleHistoryCmd() *cobra.Command {
	var data string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "history --data DIR",
		Short: "Print every bundle activation attempt recorded under DIR",
		Long: `Print the bundle history a sidecar recorded in DIR: every activation
attempt with its revision, digest, who, when, the gate's result and its
standing (active, superseded, rejected). Break-glass activations show their
reason. The sidecar must be stopped (it holds the store's lock); while it
runs, ask it: GET /v1/bundles.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if data == "" {
				return errors.New("--data DIR is required")
			}
			db, err := store.Open(filepath.Join(data, stack.StoreFile), store.Options{})
			if errors.Is(err, store.ErrLocked) {
				return fmt.Errorf("%w: stop the sidecar, or ask it with GET /v1/bundles", err)
			}
			if err != nil {
				return err
			}
			defer db.Close()
			var recs []store.BundleRecord
			if err := db.View(func(tx *store.Tx) (err error) { recs, err = tx.Bundles(); return err }); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, recs)
			}
			w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "AT\tREVISION\tSTATUS\tBY\tDIGEST\tGATE")
			for _, r := range recs {
				gate := fmt.Sprintf("%d failing case(s)", len(r.Failures)+len(r.TestFailures))
				if r.BreakGlass {
					gate = "skipped: break-glass: " + r.Reason
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%.12s\t%s\n", r.At.Format("2006-01-02T15:04:05Z"), r.Revision, r.Status, r.By, r.Digest, gate)
				for _, f := range r.Failures {
					fmt.Fprintf(w, "\t\t\t\t\t  %s: expected %s got %s\n", f.Amount, f.Expected, f.Got)
				}
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&data, "data", "", "the sidecar's data directory")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
