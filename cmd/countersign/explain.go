package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/sidecar/client"
)

func newAuditExplainCmd() *cobra.Command {
	var (
		remote remoteFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "explain WORKFLOW/STEP --sidecar URL --token-file F [--json]",
		Short: "Answer for one call: who asked, which policy, who approved, what was paid, and the proof",
		Long: `Ask a running sidecar for the evidence of one step
(GET /v1/workflows/{id}/steps/{n}/evidence) and print it: who asked (the
rep, the ticket, the agent), the policy (decision, rule, bundle revision and
digest, the decision id and the input it evaluated), the approval (who,
when, the comment, the call hash it was bound to), the effect (the ledger's
entry and amount), and the audit records that cover them, at their chain
positions, with the verdict: whether the chain verifies from its first
record through them.

A rep may explain the calls of their own workflows; a lead or an operator
any. Exit status: 0 when the records are proven, 1 when they are not (the
verdict says why), 2 when the sidecar could not be asked.`,
		Example: `  countersign audit explain W1/1 --sidecar http://127.0.0.1:8080 --token-file ops.jwt
  countersign audit explain W1/1 --sidecar http://127.0.0.1:8080 --token-file ops.jwt --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			wf, n, err := parseStepRef(args[0])
			if err != nil {
				return &exitError{code: exitAuditUnverified, err: err}
			}
			c, err := remote.client()
			if err != nil {
				return &exitError{code: exitAuditUnverified, err: err}
			}
			ev, err := c.Evidence(cmd.Context(), wf, n)
			if err != nil {
				return &exitError{code: exitAuditUnverified, err: err}
			}
			if asJSON {
				err = printJSON(cmd.OutOrStdout(), ev)
			} else {
				err = printEvidence(cmd.OutOrStdout(), ev)
			}
			if err != nil {
				return err
			}
			if !ev.Verification.OK {
				return &exitError{code: exitAuditBroken, err: fmt.Errorf("%s/%d is not proven: %s", wf, n, ev.Verification.Text)}
			}
			return nil
		},
	}
	remote.add(cmd.Flags(), "a rep's, a lead's or an operator's")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the evidence as the API answers it")
	_ = cmd.MarkFlagRequired("sidecar")
	_ = cmd.MarkFlagRequired("token-file")
	return cmd
}

// parseStepRef reads WORKFLOW/STEP.
func parseStepRef(s string) (string, int, error) {
	i := strings.LastIndexByte(s, '/')
	if i <= 0 {
		return "", 0, fmt.Errorf("%q: name the call as WORKFLOW/STEP, such as W1/1", s)
	}
	n, err := strconv.Atoi(s[i+1:])
	if err != nil || n < 1 {
		return "", 0, fmt.Errorf("%q: the step after the / is a number from 1, such as W1/1", s)
	}
	return s[:i], n, nil
}

// printEvidence writes the evidence for a person: one section per
// question, the verdict last.
func printEvidence(out io.Writer, ev client.Evidence) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	p("%s/%d\t%s %s\t%s", ev.Workflow, ev.N, ev.Call.Tool, describeArgs(ev.Call.Args), ev.Call.Status)
	p("")
	p("WHO ASKED")
	p("  rep\t%s, ticket %s, workflow opened %s", ev.Asked.Rep, ev.Asked.Ticket, evTime(ev.Asked.Opened))
	switch {
	case ev.Asked.Agent != "":
		p("  agent\t%s (its token verified by the system of record)%s", ev.Asked.Agent, evVersion(ev.Asked.AgentVersion))
	case ev.Asked.AgentVersion != "":
		p("  agent\tversion %s (declared when the workflow opened)", ev.Asked.AgentVersion)
	}
	p("  proposed\t%s%s", evTime(ev.Call.Proposed), evReason(ev.Call.AgentReason))
	p("POLICY")
	if pol := ev.Policy; pol != nil {
		p("  decision\t%s by rule %s, %s", pol.Decision, pol.Rule, evTime(pol.At))
		p("  bundle\trevision %s, digest %s", pol.Revision, evOrNone(pol.Digest))
		p("  decision id\t%s (%d decision(s) on this call)", evOrNone(pol.DecisionID), pol.Decisions)
		if len(pol.Input) > 0 {
			p("  input\t%s", pol.Input)
		}
	} else {
		p("  none logged")
	}
	p("APPROVAL")
	if a := ev.Approval; a != nil {
		who := "no one yet"
		if a.Approver != "" {
			who = a.Approver
		}
		p("  %s\tby %s%s", a.Status, who, evDecided(a.Decided))
		if a.Comment != "" {
			p("  comment\t%q", a.Comment)
		}
		p("  requested\tby %s, %s", a.Requester, evTime(a.Requested))
		match := "the call's own"
		if a.CallHash != ev.Call.CallHash {
			match = "NOT this call's " + ev.Call.CallHash
		}
		p("  call hash\t%s (%s)", a.CallHash, match)
	} else {
		p("  none")
	}
	p("EFFECT")
	if e := ev.Effect; e != nil {
		p("  entry\t%s, %s", evOrNone(e.Entry), money.Cents(e.Amount))
	} else {
		p("  none: nothing was paid or sent")
	}
	p("AUDIT RECORDS")
	for _, r := range ev.Records {
		p("  position %d\t%s by %s, %s, id %s, hash %s", r.Position, r.Kind, r.Actor, evTime(r.At), r.ID, r.Hash)
	}
	if len(ev.Records) == 0 {
		p("  none in the chain")
	}
	verdict := "PROVEN"
	if !ev.Verification.OK {
		verdict = "NOT PROVEN"
	}
	p("VERDICT\t%s: %s", verdict, ev.Verification.Text)
	return w.Flush()
}

func describeArgs(a client.Args) string {
	s := a.Order
	if a.Line != "" {
		s += fmt.Sprintf(" line %s x%d", a.Line, a.Quantity)
	}
	if a.Amount != nil {
		s += " " + a.Amount.String()
	}
	return s
}

func evTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func evVersion(v string) string {
	if v == "" {
		return ""
	}
	return ", version " + v
}

func evReason(r string) string {
	if r == "" {
		return ""
	}
	return fmt.Sprintf(", because %q", r)
}

func evDecided(t *time.Time) string {
	if t == nil {
		return ""
	}
	return ", " + evTime(*t)
}

func evOrNone(s string) string {
	if s == "" {
		return "(none recorded)"
	}
	return s
}
