package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/review"
)

func newBundleCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bundle",
		Short: "Test, build and sign policy bundles, and release them to a running sidecar",
	}
	cmd.AddCommand(newBundleTestCmd(), newBundleBuildCmd(), newBundleHistoryCmd(), newBundleExportCmd(),
		newBundleUploadCmd(), newBundleApproveCmd(), newBundleActivateCmd(), newBundleStatusCmd(), newBundleDiffCmd())
	return cmd
}

func newBundleTestCmd() *cobra.Command {
	var against string
	cmd := &cobra.Command{
		Use:   "test PATH [--against REV|PATH]",
		Short: "Run the policy gate on a bundle and show what a second operator would review",
		Long: `Run the policy gate on a bundle directory or .tar.gz, exactly as activation
does: the bundle's own Rego tests; its limits (and any run bounds and
breaker thresholds both set) compared with the reference's, each change
declared in its .manifest (metadata.limit_changes); then the boundary and
invariant cases that ship with countersign, at the bundle's limits when
every change is declared, else at the reference's. Prints one line per
case and exits 1 if anything fails.

Then it prints the review a second operator would read after an upload:
whether the bundle is a pure tightening of the reference (only that goes
live on one operator), the unified diff of each Rego file, the data diff,
and the new allowances: the inputs, generated from what both bundles
mention and the gate's cases, on which the bundle is more permissive than
the reference. The review does not change the exit status.

The reference is what a sidecar compares a candidate with: its active
bundle. By default it is the embedded release ` + policy.BaselineRevision + `, what a sidecar with
no bundle active uses; --against names another release or a bundle file.
PATH and --against may name an embedded release (p1, p2, p3 ...) when no
such file exists.`,
		Example: `  countersign bundle test p2
  countersign bundle test --against p3 p4.tar.gz`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := loadBundleArg(args[0])
			if err != nil {
				return err
			}
			reference, err := referenceBundle(against)
			if err != nil {
				return err
			}
			report, err := policy.CheckAgainst(cmd.Context(), b, reference)
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
			if len(report.LimitFailures) > 0 {
				_, want := policy.Declarations(b, reference)
				fmt.Fprintf(cmd.OutOrStdout(), "to declare the limit changes against %s, %s\n", reference.Revision(), declareWith(want))
			}
			// What a second operator would be shown: the review has no
			// decision log here, only the literals and the gate's cases.
			rv, err := review.New(cmd.Context(), reference, b, nil)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout())
			if err := printReview(cmd.OutOrStdout(), rv); err != nil {
				return err
			}
			if !report.Passed() {
				return &exitError{code: 1, err: fmt.Errorf("bundle %s failed the gate", report.Revision)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&against, "against", "", "the bundle compared with, as a sidecar compares with its active one: an embedded release or a bundle file (default: "+policy.BaselineRevision+")")
	return cmd
}

// referenceBundle is the bundle --against names, or the baseline.
func referenceBundle(against string) (*policy.Bundle, error) {
	if against == "" {
		return policy.Baseline()
	}
	b, err := loadBundleArg(against)
	if err != nil {
		return nil, fmt.Errorf("--against %s: %w", against, err)
	}
	return b, nil
}

// buildFlags are bundle build's command line.
type buildFlags struct {
	out          string
	revision     string
	data         string
	rego         string
	limitChanges []string
	against      string
	signingKey   string
	signingKeyID string
}

func newBundleBuildCmd() *cobra.Command {
	var f buildFlags
	cmd := &cobra.Command{
		Use:   "build (DIR | --revision REV [--data FILE]) -o FILE",
		Short: "Build a policy bundle: a new revision from rego/ and its data.json, or a bundle directory as it is",
		Long: `Build a bundle .tar.gz whose bytes depend only on the files' paths and
contents, so its sha256 digest is the same wherever it is built (a signed
bundle's signature may differ: ECDSA signatures are randomized).

With --revision it builds a new revision from the one Rego source: the
.rego files of --rego (tests included), the data file (--data, by default
data.json in --rego, the limits in force beside the Rego) as data.json,
and a .manifest with the revision, roots ["countersign"] and rego_version
1. Each --limit-change NAME:FROM:TO declares a change of one limit of
data.countersign.limits (refund_auto ...), or of a run bound or a breaker
threshold that both bundles set (bounds.max_steps, breaker.max_failures
...), in the manifest (metadata.limit_changes): FROM is the value in the
bundle that will be active when this one is activated (--against, as for
bundle test: by default the embedded release ` + policy.BaselineRevision + `), TO the value in
the data. The gate refuses a bundle whose limits differ from the active
bundle's without such a declaration, so the build refuses it first and
names every --limit-change to give.

With DIR it packs a bundle directory as it is (.manifest, data.json,
.rego files).

--signing-key signs the bundle in OPA's format (.signatures.json), as
opa build --signing-key does; a sidecar started with
--bundle-verification-key verifies it. The key is a PEM private key; the
algorithm follows from it: RS256 for RSA, ES256/ES384/ES512 for ECDSA
P-256/P-384/P-521, EdDSA for Ed25519.

The bundle is loaded before it is written, so a bundle that would be
refused (bad limits or declarations, a forbidden built-in) is not written.`,
		Example: `  countersign bundle build --revision p4 --limit-change refund_auto:5000:7500 -o p4.tar.gz
  countersign bundle build --revision p4 --against p4-active.tar.gz --signing-key key.pem -o p5.tar.gz
  countersign bundle build ./my-bundle -o my-bundle.tar.gz`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return f.run(cmd, args) },
	}
	cmd.Flags().StringVarP(&f.out, "output", "o", "", "the .tar.gz to write")
	cmd.Flags().StringVar(&f.revision, "revision", "", "build this revision from --rego and --data (e.g. p4)")
	cmd.Flags().StringVar(&f.data, "data", "", "the data file of the new revision, written as data.json (with --revision; default: data.json in --rego)")
	cmd.Flags().StringVar(&f.rego, "rego", "rego", "the Rego source directory (with --revision)")
	cmd.Flags().StringArrayVar(&f.limitChanges, "limit-change", nil, "declare a limit change NAME:FROM:TO, e.g. refund_auto:5000:7500 (repeatable; with --revision)")
	cmd.Flags().StringVar(&f.against, "against", "", "the bundle that will be active, whose limits FROM is: an embedded release or a bundle file (with --revision; default: "+policy.BaselineRevision+")")
	cmd.Flags().StringVar(&f.signingKey, "signing-key", "", "sign the bundle with this PEM private key")
	cmd.Flags().StringVar(&f.signingKeyID, "signing-key-id", policy.DefaultKeyID, "the key id the signature names (with --signing-key)")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

func (f buildFlags) run(cmd *cobra.Command, args []string) error {
	fsys, err := f.source(cmd, args)
	if err != nil {
		return fmt.Errorf("bundle build: %w", err)
	}
	var archive []byte
	if f.signingKey == "" {
		archive, err = policy.Build(fsys)
	} else {
		archive, err = f.sign(fsys)
	}
	if err != nil {
		return fmt.Errorf("bundle build: %w", err)
	}
	b, err := policy.LoadArchive(archive)
	if err != nil {
		return err
	}
	if err := b.Forbidden(); err != nil {
		return err
	}
	if f.revision != "" {
		if err := f.declared(b); err != nil {
			return fmt.Errorf("bundle build: %w", err)
		}
	}
	if err := os.WriteFile(f.out, archive, 0o644); err != nil {
		return err
	}
	signed := ""
	if f.signingKey != "" {
		signed = ", signed by key " + f.signingKeyID
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: revision %s, sha256 %s%s\n", f.out, b.Revision(), b.Digest(), signed)
	return err
}

// declared refuses a new revision whose --limit-change flags are not
// exactly the changes its data makes against --against, naming the flags
// that are.
func (f buildFlags) declared(b *policy.Bundle) error {
	reference, err := referenceBundle(f.against)
	if err != nil {
		return err
	}
	failures, want := policy.Declarations(b, reference)
	if len(failures) == 0 {
		return nil
	}
	var problems []string
	for _, c := range failures {
		problems = append(problems, fmt.Sprintf("%s has %s, the data %s", reference.Revision(), c.Expected, c.Got))
	}
	return fmt.Errorf("%w: %s; %s", errUndeclaredLimits, strings.Join(problems, ", "), declareWith(want))
}

// declareWith says how to declare exactly the changes want.
func declareWith(want []policy.LimitChange) string {
	if len(want) == 0 {
		return "build with no --limit-change"
	}
	return "build with " + limitChangeFlags(want)
}

// errUndeclaredLimits is a new revision whose limit changes are not
// declared as they are.
var errUndeclaredLimits = errors.New("the data changes limits that are not declared as they are")

// limitChangeFlags is the --limit-change flags that declare changes.
func limitChangeFlags(changes []policy.LimitChange) string {
	flags := make([]string, len(changes))
	for i, c := range changes {
		flags[i] = c.Flag()
	}
	return strings.Join(flags, " ")
}

// source is the bundle's files: DIR as it is, or the new revision.
func (f buildFlags) source(cmd *cobra.Command, args []string) (fs.FS, error) {
	if len(args) == 1 {
		for _, name := range []string{"revision", "data", "rego", "limit-change", "against"} {
			if cmd.Flags().Changed(name) {
				return nil, fmt.Errorf("--%s builds a new revision from the Rego source; give it without DIR", name)
			}
		}
		if fi, err := os.Stat(args[0]); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("%s is not a bundle directory", args[0])
		}
		return os.DirFS(args[0]), nil
	}
	if f.revision == "" {
		return nil, errors.New("give a bundle DIR, or --revision to build a new revision from --rego and its data.json")
	}
	dataFile := f.data
	if dataFile == "" {
		dataFile = filepath.Join(f.rego, "data.json")
	}
	data, err := os.ReadFile(dataFile)
	if err != nil {
		return nil, fmt.Errorf("--data %s: %w", dataFile, err)
	}
	changes, err := parseLimitChanges(f.limitChanges)
	if err != nil {
		return nil, err
	}
	return policy.Source(os.DirFS(f.rego), data, f.revision, changes)
}

func (f buildFlags) sign(fsys fs.FS) ([]byte, error) {
	key, err := os.ReadFile(f.signingKey)
	if err != nil {
		return nil, fmt.Errorf("--signing-key: %w", err)
	}
	signer, err := policy.NewSigner(key, f.signingKeyID)
	if err != nil {
		return nil, fmt.Errorf("--signing-key %s: %w", f.signingKey, err)
	}
	return signer.Sign(fsys)
}

// parseLimitChanges reads --limit-change NAME:FROM:TO values.
func parseLimitChanges(values []string) ([]policy.LimitChange, error) {
	var out []policy.LimitChange
	for _, v := range values {
		parts := strings.Split(v, ":")
		if len(parts) != 3 {
			return nil, fmt.Errorf("--limit-change %q: want NAME:FROM:TO, e.g. refund_auto:5000:7500", v)
		}
		from, errFrom := strconv.ParseInt(parts[1], 10, 64)
		to, errTo := strconv.ParseInt(parts[2], 10, 64)
		if errFrom != nil || errTo != nil {
			return nil, fmt.Errorf("--limit-change %q: FROM and TO are whole numbers in the limit's units (cents or seconds)", v)
		}
		out = append(out, policy.LimitChange{Name: parts[0], From: from, To: to})
	}
	return out, nil
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
	for _, f := range r.LimitFailures {
		fmt.Fprintf(tw, "FAIL\t%s\t\texpected %s\tgot %s\n", f.Case, f.Expected, f.Got)
	}
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
	whose := "the bundle's"
	if len(r.LimitFailures) > 0 {
		whose = "the reference's (the bundle changes limits it does not declare)"
	}
	limits, err := json.Marshal(r.Limits)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "limits in force: %s %s\n", whose, limits)
	for _, c := range r.Changes {
		fmt.Fprintf(w, "declared change: %s\n", c)
	}
	fmt.Fprintf(w, "rego tests: %d passed, %d failed\n", r.TestsPassed, len(r.TestFailures))
	verdict := "PASS"
	if !r.Passed() {
		verdict = "FAIL"
	}
	_, err = fmt.Fprintf(w, "%s: bundle %s (sha256 %s): %d undeclared limit change(s), %d of %d cases failed, %d rego tests failed\n",
		verdict, r.Revision, r.Digest, len(r.LimitFailures), len(r.FailedCases()), len(r.Cases), len(r.TestFailures))
	return err
}

func outcome(decision, rule string) string {
	if rule == "" {
		return decision
	}
	return decision + " (" + rule + ")"
}

func newBundleExportCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "export REVISION -o FILE",
		Short: "Write an embedded release (p1, p2, p3 ...) as its .tar.gz, byte for byte",
		Long: `Write one of the releases embedded in this binary as the .tar.gz it was
released as, so its digest is the released one: to upload it to a sidecar
(POST /v1/bundles), to inspect it, or to sign it. The releases are listed
with their digests in bundles/releases/SHA256SUMS.`,
		Example: `  countersign bundle export p3 -o p3.tar.gz`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			archive, err := bundles.Archive(args[0])
			if err != nil {
				return fmt.Errorf("bundle export: no release %q in this binary (it has %s)", args[0], strings.Join(bundles.Names, ", "))
			}
			return os.WriteFile(out, archive, 0o644)
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "the .tar.gz to write")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}
