package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/executor/policy"
)

func newBundleCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bundle",
		Short: "Test and build policy bundles",
	}
	cmd.AddCommand(newBundleTestCmd(), newBundleBuildCmd(), newBundleHistoryCmd())
	return cmd
}

func newBundleTestCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "test PATH",
		Short: "Run the policy gate on a bundle: its own Rego tests and the pinned boundary cases",
		Long: `Run the policy gate on a bundle directory or .tar.gz, exactly as activation
does: the bundle's own Rego tests, then the pinned boundary cases that ship
with countersign. Prints one line per case and exits 1 if anything fails.
PATH may also name an embedded bundle (p1, p2, p3) when no such file exists.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := loadBundleArg(args[0])
			if err != nil {
				return err
			}
			report, err := policy.Check(cmd.Context(), b)
			if errors.Is(err, policy.ErrForbiddenBuiltin) || errors.Is(err, policy.ErrNoTests) {
				// A refusal is the gate's answer, as a failed case is.
				fmt.Fprintf(cmd.OutOrStdout(), "FAIL: bundle %s refused: %v\n", b.Revision(), err)
				return &exitError{code: 1, err: fmt.Errorf("bundle %s failed the gate", b.Revision())}
			}
			if err != nil {
				return err
			}
			if err := printReport(cmd.OutOrStdout(), report); err != nil {
				return err
			}
			if !report.Passed() {
				return &exitError{code: 1, err: fmt.Errorf("bundle %s failed the gate", report.Revision)}
			}
			return nil
		},
	}
}

func newBundleBuildCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "build DIR -o FILE",
		Short: "Pack a bundle directory into a deterministic .tar.gz",
		Long: `Pack a bundle directory into a .tar.gz whose bytes depend only on the files'
paths and contents, so its sha256 digest is the same wherever it is built.
The bundle is loaded first, so a bundle that would be refused is not written.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if fi, err := os.Stat(args[0]); err != nil || !fi.IsDir() {
				return fmt.Errorf("bundle build: %s is not a bundle directory", args[0])
			}
			archive, err := policy.Build(os.DirFS(args[0]))
			if err != nil {
				return err
			}
			b, err := policy.LoadArchive(archive)
			if err != nil {
				return err
			}
			if err := b.Forbidden(); err != nil {
				return err
			}
			if err := os.WriteFile(out, archive, 0o644); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: revision %s, sha256 %s\n", out, b.Revision(), b.Digest())
			return err
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "the .tar.gz to write")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

// loadBundleArg loads a directory or .tar.gz, or else the embedded bundle
// of that name, so `bundle test p2` works from any directory.
func loadBundleArg(arg string) (*policy.Bundle, error) {
	_, statErr := os.Stat(arg)
	if errors.Is(statErr, os.ErrNotExist) {
		if dir, err := bundles.Open(arg); err == nil {
			return policy.LoadFS(dir)
		}
	}
	return policy.LoadPath(arg)
}

func printReport(w io.Writer, r policy.Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range r.Cases {
		status := "PASS"
		if !c.Pass() {
			status = "FAIL"
		}
		got := outcome(c.Got, c.GotRule)
		if c.Error != "" {
			got = "error: " + c.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\texpected %s\tgot %s\n", status, c.Case, c.Amount, outcome(c.Expected, c.ExpectedRule), got)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, f := range r.TestFailures {
		fmt.Fprintf(w, "FAIL\trego test %s\n", f)
	}
	failedCases := len(r.Failures())
	fmt.Fprintf(w, "rego tests: %d passed, %d failed\n", r.TestsPassed, len(r.TestFailures))
	verdict := "PASS"
	if !r.Passed() {
		verdict = "FAIL"
	}
	_, err := fmt.Fprintf(w, "%s: bundle %s (sha256 %s): %d of %d pinned cases failed, %d rego tests failed\n",
		verdict, r.Revision, r.Digest, failedCases, len(r.Cases), len(r.TestFailures))
	return err
}

func outcome(decision, rule string) string {
	if rule == "" {
		return decision
	}
	return decision + " (" + rule + ")"
}
