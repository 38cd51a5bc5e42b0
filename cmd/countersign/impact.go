package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/impact"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/review"
	"github.com/countersign/countersign/executor/store"
)

func newBundleImpactCmd() *cobra.Command {
	var (
		data    string
		last    int
		asJSON  bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "impact --data DIR CANDIDATE [--last N]",
		Short: "Replay the recent decisions in DIR against a candidate bundle and show which would change",
		Long: `Replay the last N decisions a stopped sidecar logged in DIR/sidecar.db against
CANDIDATE (a bundle directory or .tar.gz), each with the input the policy
evaluated at the time, and show the decisions that would come out
otherwise, grouped by what they were, what they would be and the
candidate's rule, largest group first, with up to three examples each.

Then show the review a second operator would read, against the bundle
the sidecar has active (the baseline release when none): whether the
candidate is a pure tightening of it, the Rego and data diffs, and the
new allowances, from what both bundles mention, the gate's cases and
these decisions' inputs.

Only the policy changes in a replay: the facts (the order, the totals) are
those recorded. Decisions logged before inputs were recorded are skipped
and counted. Nothing is activated. While the sidecar runs, ask it instead:
POST /v1/bundles?dry_run=true.`,
		Example: `  countersign bundle impact --data /tmp/cs p4.tar.gz
  countersign bundle impact --data /tmp/cs p4.tar.gz --last 500 --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if last < 1 {
				return fmt.Errorf("--last %d: replay at least one decision", last)
			}
			candidate, err := policy.LoadPath(args[0])
			if err != nil {
				return err
			}
			db, err := openStopped(data, timeout, "POST /v1/bundles?dry_run=true")
			if err != nil {
				return err
			}
			defer db.Close()
			var log []store.Decision
			var active []byte
			if err := db.View(func(tx *store.Tx) (err error) {
				if log, err = tx.LastDecisions(last); err != nil {
					return err
				}
				_, active, err = tx.ActiveBundle()
				if errors.Is(err, store.ErrNotFound) {
					return nil
				}
				return err
			}); err != nil {
				return err
			}
			report, err := impact.Replay(cmd.Context(), candidate, log)
			if err != nil {
				return err
			}
			rv, err := reviewAgainst(cmd.Context(), active, candidate, log)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), impactAnswer{Report: report, Review: rv})
			}
			if err := printImpact(cmd.OutOrStdout(), candidate.Revision(), candidate.Digest(), report); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout())
			return printReview(cmd.OutOrStdout(), rv)
		},
	}
	cmd.Flags().StringVar(&data, "data", "", "the sidecar's data directory (holds sidecar.db)")
	cmd.Flags().IntVar(&last, "last", impact.DefaultLast, "how many of the most recent decisions to replay")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print the report as JSON ({"replayed", "skipped", "changed": [{"from", "to", "rule", "count", "examples"}], and the review's "against", "second_operator", "diff", "data_diff", "new_allowances"})`)
	cmd.Flags().DurationVar(&timeout, "lock-timeout", time.Second, "how long to wait for a running sidecar to release the file")
	return cmd
}

// impactAnswer is bundle impact's JSON: the replay and the review.
type impactAnswer struct {
	impact.Report
	review.Review
}

// reviewAgainst reviews candidate against the bundle a stopped sidecar
// had active (archive; the baseline when none), with the inputs of the
// decisions it logged, newest first.
func reviewAgainst(ctx context.Context, archive []byte, candidate *policy.Bundle, log []store.Decision) (review.Review, error) {
	ref, err := policy.Baseline()
	if archive != nil {
		ref, err = policy.LoadArchive(archive)
	}
	if err != nil {
		return review.Review{}, fmt.Errorf("the sidecar's active bundle: %w", err)
	}
	var logged []policy.Input
	for i := len(log) - 1; i >= 0; i-- {
		if in, err := engine.UnmarshalInput(log[i].Input); len(log[i].Input) > 0 && err == nil {
			logged = append(logged, in)
		}
	}
	return review.New(ctx, ref, candidate, logged)
}

// printImpact writes the report as tables: the outcomes that would flip,
// one group a row, with their amount; then the decisions that would keep
// their outcome by another rule.
func printImpact(w io.Writer, revision, digest string, r impact.Report) error {
	changed := 0
	for _, c := range r.Changed {
		changed += c.Count
	}
	fmt.Fprintf(w, "candidate %s (sha256 %.12s): %d decisions replayed, %d would change (%s in all), %d skipped (no recorded input)\n",
		revision, digest, r.Replayed, changed, r.ChangedAmount, r.Skipped)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(r.Changed) == 0 {
		fmt.Fprintln(w, "no decision would change")
	} else {
		fmt.Fprintln(tw, "FROM\tTO\tRULE\tCOUNT\tAMOUNT\tEXAMPLES")
	}
	for _, c := range r.Changed {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", c.From, c.To, c.Rule, c.Count, c.Amount, examples(c.Examples))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.RuleChanged) == 0 {
		_, err := fmt.Fprintln(w, "no decision would keep its outcome by another rule")
		return err
	}
	fmt.Fprintln(w, "same outcome, another rule:")
	fmt.Fprintln(tw, "DECISION\tRULE RECORDED\tCANDIDATE RULE\tCOUNT\tAMOUNT\tEXAMPLES")
	for _, c := range r.RuleChanged {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", c.Decision, c.FromRule, c.ToRule, c.Count, c.Amount, examples(c.Examples))
	}
	return tw.Flush()
}

func examples(xs []impact.Example) string {
	var ex []string
	for _, e := range xs {
		s := fmt.Sprintf("%s/%d %s", e.Workflow, e.N, e.Order)
		if e.Amount != 0 {
			s += " " + e.Amount.String()
		}
		ex = append(ex, s)
	}
	return strings.Join(ex, ", ")
}
