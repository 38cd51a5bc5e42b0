package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/review"
)

// printReview writes what a second operator would be shown of a bundle:
// why it needs one, the diff of each Rego file (as a patch, unindented),
// the data diff and the new allowances with their examples.
func printReview(w io.Writer, r review.Review) error {
	fmt.Fprintf(w, "review against %s (sha256 %.12s):\n", r.Against.Revision, r.Against.Digest)
	if len(r.SecondOperator) == 0 {
		fmt.Fprintln(w, "second operator: not needed, a pure tightening")
	} else {
		fmt.Fprintln(w, "second operator: needed, it is not a pure tightening:")
		for _, why := range r.SecondOperator {
			fmt.Fprintf(w, "  %s\n", why)
		}
	}
	if err := printDiffs(w, r.Diff, r.DataDiff); err != nil {
		return err
	}
	a := r.NewAllowances
	switch {
	case a.Skipped != "":
		fmt.Fprintf(w, "new allowances: none; %s\n", a.Skipped)
	default:
		fmt.Fprintf(w, "new allowances: %d of %d generated inputs are more permissive\n", a.Count, a.Evaluated)
	}
	if a.Incomplete != "" {
		fmt.Fprintf(w, "  incomplete: %s\n", a.Incomplete)
	}
	for _, ex := range a.Examples {
		fmt.Fprintf(w, "  %s: %s → %s\n", summary(ex), verdict(ex.Active), verdict(ex.Candidate))
	}
	return nil
}

// printDiffs writes the diff of each Rego file (as a patch, unindented)
// and the data diff, one value a line.
func printDiffs(w io.Writer, modules []review.ModuleDiff, data []policy.DataChange) error {
	for _, d := range modules {
		what := "the rules change"
		switch {
		case d.Test:
			what = "a test"
		case !d.PolicyChanged:
			what = "layout or comments only"
		}
		fmt.Fprintf(w, "diff %s %s (%s):\n%s", d.Path, d.Change, what, d.Unified)
	}
	if len(data) == 0 {
		return nil
	}
	fmt.Fprintln(w, "data diff:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, d := range data {
		fmt.Fprintf(tw, "  %s\t%s → %s\t%s %s\n", d.Path, orAbsent(d.Old), orAbsent(d.New), d.Change, d.Limit)
	}
	return tw.Flush()
}

func orAbsent(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "(absent)"
	}
	return string(raw)
}

func verdict(v review.Verdict) string {
	switch {
	case v.Error != "":
		return v.Decision + " (error: " + v.Error + ")"
	case v.Rule != "":
		return v.Decision + " (" + v.Rule + ")"
	}
	return v.Decision
}

// summary is an example's input in one line: who, what, which order and
// how much for a call; who approves whose request for an approval.
func summary(ex review.Allowance) string {
	var in struct {
		User *struct {
			ID, Region string
		} `json:"user"`
		Tool string `json:"tool"`
		Args struct {
			Order  string      `json:"order"`
			Amount money.Cents `json:"amount"`
		} `json:"args"`
		Order *struct {
			Region string      `json:"region"`
			Paid   money.Cents `json:"paid"`
		} `json:"order"`
		Approver struct {
			ID, Role, Region string
			ApproveLimit     money.Cents `json:"approve_limit"`
		} `json:"approver"`
		Requester struct{ ID, Region string } `json:"requester"`
		Amount    money.Cents                 `json:"amount"`
	}
	if err := json.Unmarshal(ex.Input, &in); err != nil {
		return ex.Kind + " " + string(ex.Input)
	}
	if ex.Kind == review.KindApprover {
		return fmt.Sprintf("approval by %s (%s, %s, limit %s) of %s's (%s) %s %s", in.Approver.ID, in.Approver.Role, in.Approver.Region,
			in.Approver.ApproveLimit, in.Requester.ID, in.Requester.Region, in.Tool, in.Amount)
	}
	var b strings.Builder
	b.WriteString("call by ")
	if in.User != nil {
		fmt.Fprintf(&b, "%s (%s)", in.User.ID, in.User.Region)
	} else {
		b.WriteString("nobody")
	}
	fmt.Fprintf(&b, " %s %s", in.Tool, in.Args.Order)
	if in.Order != nil {
		fmt.Fprintf(&b, " (%s, paid %s)", in.Order.Region, in.Order.Paid)
	}
	if in.Tool == "issue_refund" {
		fmt.Fprintf(&b, " %s", in.Args.Amount)
	}
	return b.String()
}
