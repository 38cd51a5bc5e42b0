package main

import (
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/store"
)

func newBundleHistoryCmd() *cobra.Command {
	var data string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "history --data DIR",
		Short: "Print every bundle activation attempt recorded under DIR",
		Long: `Print the bundle history a sidecar recorded in DIR: every activation
attempt with its revision, digest, who (and who proposed it, when a second
operator approved it), when, the gate's result and its standing (active,
superseded, rejected, awaiting_second_operator, approved), and the limits
that changed from the bundle it replaced. Break-glass activations show
their reason. The sidecar must be stopped (it holds the store's lock); while it
runs, ask it: GET /v1/bundles.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			db, err := openStopped(data, time.Second, "GET /v1/bundles")
			if err != nil {
				return err
			}
			defer db.Close()
			var recs []store.BundleRecord
			blobs := map[string][]byte{}
			err = db.View(func(tx *store.Tx) (err error) {
				if recs, err = tx.Bundles(); err != nil {
					return err
				}
				for _, r := range recs {
					if blobs[r.Digest], err = tx.BundleBytes(r.Digest); err != nil && !errors.Is(err, store.ErrNotFound) {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, recs)
			}
			w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "AT\tREVISION\tSTATUS\tBY\tDIGEST\tGATE")
			var before *policy.Limits // of the bundle active before each record
			for _, r := range recs {
				gate := fmt.Sprintf("%d failing case(s)", len(r.Failures)+len(r.TestFailures))
				if r.BreakGlass {
					gate = "skipped: break-glass: " + r.Reason
				}
				by := r.By
				if r.Proposer != "" {
					by += " (proposed by " + r.Proposer + ")"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%.12s\t%s\n", r.At.Format("2006-01-02T15:04:05Z"), r.Revision, r.Status, by, r.Digest, gate)
				limits, ok := bundleLimits(blobs[r.Digest])
				if ok && before != nil {
					for _, c := range policy.ChangesBetween(*before, limits) {
						fmt.Fprintf(w, "\t\t\t\t\t  limit %s\n", c)
					}
				}
				for _, f := range r.Failures {
					what := f.Amount.String()
					if f.Case == policy.LimitChangeUndeclared {
						what = f.Case
					}
					fmt.Fprintf(w, "\t\t\t\t\t  %s: expected %s got %s\n", what, f.Expected, f.Got)
				}
				if ok && (r.Status == store.BundleActive || r.Status == store.BundleSuperseded) {
					before = &limits
				}
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&data, "data", "", "the sidecar's data directory")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// bundleLimits reads the limits of a bundle archive the history keeps.
func bundleLimits(blob []byte) (policy.Limits, bool) {
	if blob == nil {
		return policy.Limits{}, false
	}
	b, err := policy.LoadArchive(blob)
	if err != nil {
		return policy.Limits{}, false
	}
	return b.Limits(), true
}
