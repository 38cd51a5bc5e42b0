package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/countersign/countersign/executor/impact"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/review"
	"github.com/countersign/countersign/executor/strictjson"
	"github.com/countersign/countersign/sidecar/client"
)

// The release path against a running sidecar: upload (or a dry run),
// a second operator's approval, a rollback, the status and a diff of any
// two bundles. Each command is one or two calls of sidecar/client; the
// tables read the API's answers, and --json prints them as they are.

// The environment a release command reads when its flag is not given.
const (
	envSidecar = "COUNTERSIGN_SIDECAR"
	// envToken holds the token itself, for a CI job that has it in a
	// secret variable rather than in a file.
	envToken = "COUNTERSIGN_TOKEN"
)

// sidecarFlags are how a release command reaches a sidecar, and how it
// answers.
type sidecarFlags struct {
	url, tokenFile string
	asJSON         bool
}

func (f *sidecarFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.url, "sidecar", "", "the sidecar's base URL, e.g. http://127.0.0.1:8080 (default $"+envSidecar+"; serve --dev writes it to DIR/dev-endpoints.json)")
	cmd.Flags().StringVar(&f.tokenFile, "token-file", "", "file holding an operator's bearer token (default: the token in $"+envToken+")")
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print the API's JSON answer as it is")
}

// client is a client of the sidecar the flags or the environment name,
// as the operator whose token they give.
func (f sidecarFlags) client() (*client.Client, error) {
	base := cmp.Or(f.url, os.Getenv(envSidecar))
	if base == "" {
		return nil, fmt.Errorf("say which sidecar: --sidecar URL or %s (serve --dev writes its URL to DIR/dev-endpoints.json as \"sidecar\")", envSidecar)
	}
	token, err := f.token()
	if err != nil {
		return nil, err
	}
	c, err := client.New(base, token)
	if err != nil {
		return nil, fmt.Errorf("--sidecar: %w", err)
	}
	return c, nil
}

func (f sidecarFlags) token() (string, error) {
	if f.tokenFile != "" {
		return readTokenFile(f.tokenFile)
	}
	token := strings.TrimSpace(os.Getenv(envToken))
	switch {
	case token == "":
		return "", fmt.Errorf("give an operator's token: --token-file F, or the token itself in %s", envToken)
	case strings.ContainsAny(token, " \t\r\n"):
		return "", fmt.Errorf("%s: want one bearer token (a JWT) and nothing else", envToken)
	}
	return token, nil
}

// readTokenFile reads the one bearer token a --token-file holds.
func readTokenFile(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	token := strings.TrimSpace(string(raw))
	if token == "" || strings.ContainsAny(token, " \t\r\n") {
		return "", fmt.Errorf("--token-file %s: want one bearer token (a JWT) and nothing else", path)
	}
	return token, nil
}

// nextSteps say what to do after an API error, by its code.
var nextSteps = map[string]string{
	"unauthenticated": "the sidecar refused the token: give a current operator's token with --token-file or " + envToken,
	"forbidden_role":  "this takes an operator's token (role operator)",
	"same_operator":   "the operator who uploaded a bundle cannot approve it: another operator runs countersign bundle approve DIGEST with their own token",
	"not_found":       "countersign bundle status lists the bundles the sidecar holds",
	"not_pending":     "the bundle awaits no second operator: countersign bundle status shows where it stands",
	"gate_failed":     "fix the cases above; countersign bundle test FILE runs the same gate locally",
}

// apiFailure shows an API error on w (its body with --json, else the
// failing cases of a gate_failed) and returns it as the command's error:
// its status, code and message, and what to do next.
func apiFailure(w io.Writer, err error, asJSON bool) error {
	var ae *client.Error
	if !errors.As(err, &ae) {
		return err
	}
	if asJSON {
		body := client.GateFailedBody{ErrorBody: client.ErrorBody{Error: ae, RequestID: ae.RequestID}, Failures: ae.Failures}
		if ae.Failures == nil {
			if err := printJSON(w, body.ErrorBody); err != nil {
				return err
			}
		} else if err := printJSON(w, body); err != nil {
			return err
		}
	} else if len(ae.Failures) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "FAILED CASE\tAMOUNT\tEXPECTED\tGOT")
		for _, f := range ae.Failures {
			amount := ""
			if f.Amount != nil {
				amount = f.Amount.String()
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f.Case, amount, outcome(f.Expected, f.ExpectedRule), outcome(f.Got, f.GotRule))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	code := cmp.Or(ae.Code, "no code")
	msg := fmt.Sprintf("the sidecar answered %d %s: %s", ae.Status, code, ae.Message)
	if ae.RequestID != "" {
		msg += " (request " + ae.RequestID + ")"
	}
	if next := nextSteps[ae.Code]; next != "" {
		msg += "\n" + next
	}
	return &exitError{code: 1, err: errors.New(msg)}
}

// releaseCmd is a release command: its flags, and a run that has a
// client and the command's output.
func releaseCmd(cmd *cobra.Command, f *sidecarFlags, run func(ctx context.Context, c *client.Client, w io.Writer, args []string) error) *cobra.Command {
	f.register(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := f.client()
		if err != nil {
			return err
		}
		return apiFailure(cmd.OutOrStdout(), run(cmd.Context(), c, cmd.OutOrStdout(), args), f.asJSON)
	}
	return cmd
}

func newBundleUploadCmd() *cobra.Command {
	var (
		f      sidecarFlags
		dryRun bool
	)
	cmd := &cobra.Command{
		Use:   "upload FILE [--dry-run] --sidecar URL --token-file F",
		Short: "Upload a bundle .tar.gz to a running sidecar, through its gate (POST /v1/bundles)",
		Long: `Upload a bundle .tar.gz to the sidecar, which runs it through the gate
against its active bundle. A pure tightening goes live at once; any other
bundle waits for a second operator (202 awaiting_second_operator), and the
command says who may approve it and how. A bundle the gate refuses is shown
with its failing cases, and the command exits 1.

--dry-run activates and records nothing (POST /v1/bundles?dry_run=true): it
shows the gate's verdict, the replay of the sidecar's recent decisions (the
outcomes that would flip, their amount in all, and the decisions that would
keep their outcome by another rule) and the review a second operator would
read; it exits 1 when the gate would refuse the bundle.`,
		Example: `  countersign bundle upload p4.tar.gz --dry-run --sidecar http://127.0.0.1:8080 --token-file ops.jwt
  COUNTERSIGN_SIDECAR=http://127.0.0.1:8080 COUNTERSIGN_TOKEN=$(cat ops.jwt) countersign bundle upload p4.tar.gz`,
		Args: cobra.ExactArgs(1),
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "show what an upload would meet, activating and recording nothing")
	return releaseCmd(cmd, &f, func(ctx context.Context, c *client.Client, w io.Writer, args []string) error {
		archive, err := os.ReadFile(args[0])
		if err != nil {
			return err
		}
		if !dryRun {
			act, err := c.UploadBundle(ctx, archive, client.UploadOptions{})
			if err != nil {
				return err
			}
			return printActivation(ctx, c, w, act, f.asJSON)
		}
		p, err := c.DryRunBundle(ctx, archive)
		if err != nil {
			return err
		}
		if f.asJSON {
			err = printJSON(w, p)
		} else {
			err = printPreview(w, p)
		}
		if err == nil && !gatePassed(p.Gate) {
			return &exitError{code: 1, err: fmt.Errorf("the gate would refuse %s: nothing was activated", p.Gate.Revision)}
		}
		return err
	})
}

func newBundleApproveCmd() *cobra.Command {
	var f sidecarFlags
	cmd := &cobra.Command{
		Use:   "approve DIGEST --sidecar URL --token-file F",
		Short: "Approve, as a second operator, a bundle that awaits one: it goes live through the gate",
		Long: `Approve a bundle that awaits a second operator (POST /v1/bundles/{digest}/approve):
it goes live, through the gate again. The operator who uploaded it is refused
(403 same_operator). Read it first with countersign bundle status and
countersign bundle diff.`,
		Example: `  countersign bundle approve 9f2c...e1 --sidecar http://127.0.0.1:8080 --token-file jon.jwt`,
		Args:    cobra.ExactArgs(1),
	}
	return releaseCmd(cmd, &f, func(ctx context.Context, c *client.Client, w io.Writer, args []string) error {
		act, err := c.ApproveBundle(ctx, args[0])
		if err != nil {
			return err
		}
		return printActivation(ctx, c, w, act, f.asJSON)
	})
}

func newBundleActivateCmd() *cobra.Command {
	var f sidecarFlags
	cmd := &cobra.Command{
		Use:   "activate DIGEST --sidecar URL --token-file F",
		Short: "Activate again a bundle the sidecar's history holds (a rollback), under the same gate and rules",
		Long: `Activate again a bundle the sidecar's history holds (POST /v1/bundles/{digest}/activate),
under the same gate and rules as an upload: a rollback that is a pure
tightening of the active bundle goes live at once, any other waits for a
second operator's countersign bundle approve.`,
		Example: `  countersign bundle activate 5d41...9c --sidecar http://127.0.0.1:8080 --token-file ops.jwt`,
		Args:    cobra.ExactArgs(1),
	}
	return releaseCmd(cmd, &f, func(ctx context.Context, c *client.Client, w io.Writer, args []string) error {
		act, err := c.ActivateBundle(ctx, args[0])
		if err != nil {
			return err
		}
		return printActivation(ctx, c, w, act, f.asJSON)
	})
}

// printActivation shows what an upload, an approval or a rollback came
// to: the bundle live, or waiting for a second operator, with who may
// approve it and the command they run.
func printActivation(ctx context.Context, c *client.Client, w io.Writer, act client.Activation, asJSON bool) error {
	if asJSON {
		if act.Awaiting != nil {
			return printJSON(w, act.Awaiting)
		}
		return printJSON(w, act.Active)
	}
	if b := act.Active; b != nil {
		how := ""
		if b.Proposer != "" {
			how = ", proposed by " + b.Proposer
		}
		if b.Rollback {
			how += ", a rollback"
		}
		_, err := fmt.Fprintf(w, "%s (sha256 %s) is active, by %s%s\n", b.Revision, b.Digest, b.By, how)
		return err
	}
	a := act.Awaiting
	fmt.Fprintf(w, "%s (sha256 %s) awaits a second operator: %s\n", a.Revision, a.Digest, a.Message)
	for _, lc := range a.LimitChanges {
		fmt.Fprintf(w, "limit change: %s %d → %d\n", lc.Name, lc.From, lc.To)
	}
	if a.Impact != nil {
		if err := printWireImpact(w, a.Revision, a.Digest, *a.Impact); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	if err := printWireReview(w, a.Review); err != nil {
		return err
	}
	// The awaiting record names who uploaded it: anyone else may approve.
	who := "another operator than the one who uploaded it"
	if rec, err := c.Bundle(ctx, a.Digest); err == nil && rec.By != "" {
		who = "an operator other than " + rec.By
	}
	_, err := fmt.Fprintf(w, "\nnext: %s approves it with their own token:\n  countersign bundle approve %s\n", who, a.Digest)
	return err
}

// gatePassed is the verdict of a dry run's gate, as activation would
// reach it.
func gatePassed(g client.GateReport) bool {
	if len(g.LimitFailures) > 0 || len(g.TestFailures) > 0 {
		return false
	}
	for _, c := range g.Cases {
		if c.Error != "" || c.Got != c.Expected || c.ExpectedRule != "" && c.GotRule != c.ExpectedRule {
			return false
		}
	}
	return true
}

// printPreview shows a dry run: the gate (its failures only), the replay
// and the review, and what an upload would come to.
func printPreview(w io.Writer, p client.BundlePreview) error {
	g := p.Gate
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	failed := 0
	for _, f := range g.LimitFailures {
		failed++
		fmt.Fprintf(tw, "FAIL\t%s\t\texpected %s\tgot %s\n", f.Case, f.Expected, f.Got)
	}
	for _, c := range g.Cases {
		if c.Error == "" && c.Got == c.Expected && (c.ExpectedRule == "" || c.GotRule == c.ExpectedRule) {
			continue
		}
		failed++
		got := outcome(c.Got, c.GotRule)
		if c.Error != "" {
			got = "error: " + c.Error
		}
		fmt.Fprintf(tw, "FAIL\t%s\t%s\texpected %s\tgot %s\n", c.Case, c.Amount, outcome(c.Expected, c.ExpectedRule), got)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, t := range g.TestFailures {
		fmt.Fprintf(w, "FAIL\trego test %s\n", t)
	}
	verdict := "PASS"
	if !gatePassed(g) {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "gate %s: %s (sha256 %s): %d of %d cases and limits failed, %d rego tests failed\n",
		verdict, g.Revision, g.Digest, failed, len(g.Cases)+len(g.LimitFailures), len(g.TestFailures))
	for _, lc := range g.LimitChanges {
		fmt.Fprintf(w, "declared change: %s %d → %d\n", lc.Name, lc.From, lc.To)
	}
	if err := printWireImpact(w, g.Revision, g.Digest, p.Impact); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := printWireReview(w, p.Review); err != nil {
		return err
	}
	next := "an upload would go live at once (a pure tightening)"
	switch {
	case verdict == "FAIL":
		next = "an upload would be refused (422 gate_failed)"
	case len(p.SecondOperator) > 0:
		next = "an upload would wait for a second operator's countersign bundle approve"
	}
	_, err := fmt.Fprintf(w, "\ndry run: nothing was activated or recorded; %s\n", next)
	return err
}

// printWireImpact and printWireReview read the API's answers into the
// reports the local commands print (bundle impact, bundle test): the
// sidecar writes those reports field for field (sidecar/views.go), and
// the strict decoding fails on a field the local report does not have
// rather than leave it out of the table.
func printWireImpact(w io.Writer, revision, digest string, v client.Impact) error {
	var r impact.Report
	if err := rewire(v, &r); err != nil {
		return err
	}
	return printImpact(w, revision, digest, r)
}

func printWireReview(w io.Writer, v client.Review) error {
	var r review.Review
	if err := rewire(v, &r); err != nil {
		return err
	}
	return printReview(w, r)
}

func rewire(from, to any) error {
	b, err := json.Marshal(from)
	if err != nil {
		return err
	}
	if err := strictjson.Decode(b, to); err != nil {
		return fmt.Errorf("reading the sidecar's answer: %w", err)
	}
	return nil
}

func newBundleStatusCmd() *cobra.Command {
	var f sidecarFlags
	cmd := &cobra.Command{
		Use:   "status --sidecar URL --token-file F",
		Short: "Show the sidecar's active bundle, the bundles awaiting a second operator and the history",
		Long: `Show the bundle the sidecar has active (GET /v1/bundles/active), the
bundles that await a second operator, with the command that approves each,
and every activation attempt, oldest first (GET /v1/bundles).

--json prints {"active": ..., "history": [...]}, the two answers as they
are ("active" is null when no bundle is).`,
		Example: `  countersign bundle status --sidecar http://127.0.0.1:8080 --token-file ops.jwt`,
		Args:    cobra.NoArgs,
	}
	return releaseCmd(cmd, &f, func(ctx context.Context, c *client.Client, w io.Writer, _ []string) error {
		var active *client.Bundle
		b, err := c.ActiveBundle(ctx)
		var ae *client.Error
		switch {
		case err == nil:
			active = &b
		case errors.As(err, &ae) && ae.Code == "not_ready":
		default:
			return err
		}
		history, err := c.BundleHistory(ctx)
		if err != nil {
			return err
		}
		if f.asJSON {
			return printJSON(w, bundleStatus{Active: active, History: history})
		}
		return printStatus(w, active, history)
	})
}

// bundleStatus is bundle status's JSON: the two answers it reads.
type bundleStatus struct {
	Active  *client.Bundle  `json:"active"`
	History []client.Bundle `json:"history"`
}

func printStatus(w io.Writer, active *client.Bundle, history []client.Bundle) error {
	if active == nil {
		fmt.Fprintln(w, "active: none (the sidecar answers no call until a bundle is active)")
	} else {
		fmt.Fprintf(w, "active: %s (sha256 %s), since %s, by %s\n", active.Revision, active.Digest, active.At.UTC().Format(time.RFC3339), active.By)
	}
	var awaiting []client.Bundle
	for _, b := range history {
		if b.Status == client.BundleAwaiting {
			awaiting = append(awaiting, b)
		}
	}
	if len(awaiting) == 0 {
		fmt.Fprintln(w, "awaiting a second operator: none")
	} else {
		fmt.Fprintln(w, "awaiting a second operator:")
	}
	for _, b := range awaiting {
		fmt.Fprintf(w, "  %s (sha256 %s), uploaded by %s at %s: an operator other than %s runs\n    countersign bundle approve %s\n",
			b.Revision, b.Digest, b.By, b.At.UTC().Format(time.RFC3339), b.By, b.Digest)
	}
	fmt.Fprintln(w, "history:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tAT\tREVISION\tSHA256\tSTATUS\tBY\tNOTE")
	for _, b := range history {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%.12s\t%s\t%s\t%s\n", b.Seq, b.At.UTC().Format(time.RFC3339), b.Revision, b.Digest, b.Status, b.By, note(b))
	}
	return tw.Flush()
}

// note is what else a history row says: who proposed what a second
// operator approved, a rollback, a break of the glass, the limits
// changed and the failures of a rejection.
func note(b client.Bundle) string {
	var parts []string
	if b.Proposer != "" {
		parts = append(parts, "proposed by "+b.Proposer)
	}
	if b.Rollback {
		parts = append(parts, "rollback")
	}
	if b.BreakGlass {
		parts = append(parts, "break glass: "+b.Reason)
	}
	for _, lc := range b.LimitChanges {
		parts = append(parts, fmt.Sprintf("%s %d → %d", lc.Name, lc.From, lc.To))
	}
	if n := len(b.Failures) + len(b.TestFailures); n > 0 {
		parts = append(parts, fmt.Sprintf("%d failures", n))
	}
	return strings.Join(parts, "; ")
}

func newBundleDiffCmd() *cobra.Command {
	var f sidecarFlags
	cmd := &cobra.Command{
		Use:   "diff A B [--sidecar URL --token-file F]",
		Short: "Show how bundle B differs from bundle A: each Rego file's diff and each data value",
		Long: `Show how bundle B differs from bundle A: the unified diff of each Rego file
(tests included) and each value of the data document that differs (a limit
raised or lowered says so), as a second operator's review shows them.

A and B are bundle files (.tar.gz or a directory), or bundles the sidecar's
history holds, named by digest (or its first 8 or more hex digits, as
bundle status shows them) or by revision when one digest has it; those are
read with GET /v1/bundles/{digest}/archive, as the operator of the token.
Two files need no sidecar.

--json prints {"from", "to", "diff", "data_diff"}: the two bundles, and
the review's diff and data_diff members as the API writes them.`,
		Example: `  countersign bundle diff p3 p4.tar.gz --sidecar http://127.0.0.1:8080 --token-file ops.jwt
  countersign bundle diff 5d41402abc4b 9f2c8e11d0aa --sidecar http://127.0.0.1:8080 --token-file ops.jwt
  countersign bundle diff old.tar.gz new.tar.gz`,
		Args: cobra.ExactArgs(2),
	}
	f.register(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		w := cmd.OutOrStdout()
		r := resolver{flags: f}
		a, err := r.bundle(cmd.Context(), args[0])
		if err == nil {
			var b *policy.Bundle
			if b, err = r.bundle(cmd.Context(), args[1]); err == nil {
				err = printBundleDiff(w, a, b, f.asJSON)
			}
		}
		return apiFailure(w, err, f.asJSON)
	}
	return cmd
}

// resolver finds what a diff argument names, asking the sidecar (once)
// only for an argument that is not a file.
type resolver struct {
	flags   sidecarFlags
	c       *client.Client
	history []client.Bundle
}

// minDigestPrefix is the shortest digest prefix a diff accepts: shorter
// than bundle status's 12 columns, long enough to name one bundle.
const minDigestPrefix = 8

func (r *resolver) bundle(ctx context.Context, arg string) (*policy.Bundle, error) {
	if _, err := os.Stat(arg); err == nil {
		return policy.LoadPath(arg)
	}
	if r.c == nil {
		c, err := r.flags.client()
		if err != nil {
			return nil, fmt.Errorf("%s is not a bundle file; to read it from a sidecar, %w", arg, err)
		}
		if r.history, err = c.BundleHistory(ctx); err != nil {
			return nil, err
		}
		r.c = c
	}
	digest, err := r.digest(arg)
	if err != nil {
		return nil, err
	}
	archive, err := r.c.BundleArchive(ctx, digest)
	if err != nil {
		return nil, err
	}
	return policy.LoadArchive(archive)
}

// digest is the one digest of the history that arg names, as a digest,
// a prefix of one, or a revision.
func (r *resolver) digest(arg string) (string, error) {
	var byDigest, byRevision []string
	for _, b := range r.history {
		if b.Digest == arg || len(arg) >= minDigestPrefix && strings.HasPrefix(b.Digest, arg) {
			byDigest = appendNew(byDigest, b.Digest)
		}
		if b.Revision == arg {
			byRevision = appendNew(byRevision, b.Digest)
		}
	}
	for _, found := range [][]string{byDigest, byRevision} {
		switch len(found) {
		case 0:
			continue
		case 1:
			return found[0], nil
		}
		return "", fmt.Errorf("%s names %d bundles of the sidecar's history (%s): give a digest", arg, len(found), strings.Join(found, ", "))
	}
	return "", fmt.Errorf("%s is neither a bundle file nor a digest or revision of the sidecar's history; countersign bundle status lists them", arg)
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// bundleDiff is bundle diff's JSON.
type bundleDiff struct {
	From     review.Bundle       `json:"from"`
	To       review.Bundle       `json:"to"`
	Diff     []review.ModuleDiff `json:"diff"`
	DataDiff []policy.DataChange `json:"data_diff"`
}

func printBundleDiff(w io.Writer, a, b *policy.Bundle, asJSON bool) error {
	c, err := policy.Compare(a, b)
	if err != nil {
		return err
	}
	d := bundleDiff{From: review.Bundle{Revision: a.Revision(), Digest: a.Digest()}, To: review.Bundle{Revision: b.Revision(), Digest: b.Digest()},
		Diff: append([]review.ModuleDiff{}, review.Diff(a, b)...), DataDiff: append([]policy.DataChange{}, c.Data...)}
	if asJSON {
		return printJSON(w, d)
	}
	fmt.Fprintf(w, "from %s (sha256 %s)\nto   %s (sha256 %s)\n", d.From.Revision, d.From.Digest, d.To.Revision, d.To.Digest)
	if len(d.Diff) == 0 && len(d.DataDiff) == 0 {
		_, err := fmt.Fprintln(w, "the same Rego files and data")
		return err
	}
	return printDiffs(w, d.Diff, d.DataDiff)
}
