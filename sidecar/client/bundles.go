package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/countersign/countersign/executor/money"
)

// The policy bundles' calls (an operator's): the activation history, the
// bundle in force, an upload through the gate (or a dry run of one), a
// second operator's approval and a rollback. A bundle that fails the gate
// is a 422 gate_failed *Error whose Failures list the cases.

// BundleHistory lists every activation attempt, oldest first, without
// their reviews (Bundle reads one with its review).
func (c *Client) BundleHistory(ctx context.Context) ([]Bundle, error) {
	var h []Bundle
	err := c.call(ctx, http.MethodGet, "/v1/bundles", nil, nil, &h)
	return h, err
}

// ActiveBundle reads the record of the bundle in force.
func (c *Client) ActiveBundle(ctx context.Context) (Bundle, error) {
	var b Bundle
	err := c.call(ctx, http.MethodGet, "/v1/bundles/active", nil, nil, &b)
	return b, err
}

// Bundle reads the last record of the bundle with digest (sha256 of its
// .tar.gz, hex), with its review: what a second operator reads before
// approving it.
func (c *Client) Bundle(ctx context.Context, digest string) (Bundle, error) {
	var b Bundle
	err := c.call(ctx, http.MethodGet, "/v1/bundles/"+seg(digest), nil, nil, &b)
	return b, err
}

// BundleArchive reads the .tar.gz of a bundle the history holds, by
// digest, byte for byte as it was uploaded.
func (c *Client) BundleArchive(ctx context.Context, digest string) ([]byte, error) {
	a, err := c.do(ctx, http.MethodGet, "/v1/bundles/"+seg(digest)+"/archive", nil, nil, nil)
	if err != nil {
		return nil, err
	}
	return a.body, nil
}

// UploadBundle sends a bundle's .tar.gz to be activated through the gate.
// A pure tightening of the bundle in force goes live at once
// (Activation.Active); any other bundle, or one that breaks the glass,
// waits for a second operator (Activation.Awaiting). A bundle the gate
// refuses is a 422 gate_failed *Error with its Failures, the bundle in
// force unchanged.
func (c *Client) UploadBundle(ctx context.Context, archive []byte, o UploadOptions) (Activation, error) {
	q := url.Values{}
	if o.BreakGlass {
		q.Set("break_glass", "true")
	}
	if o.Reason != "" {
		q.Set("reason", o.Reason)
	}
	return c.activate(ctx, "/v1/bundles", q, gzipBody(archive))
}

// UploadOptions are an upload's query: BreakGlass skips the gate's verdict
// (a second operator must still approve), and needs a Reason, which the
// audit records.
type UploadOptions struct {
	BreakGlass bool
	Reason     string
}

// DryRunBundle answers what an upload of archive would meet, activating
// and recording nothing: the gate's report, the replay of recent
// decisions against it and the review a second operator would see. A
// bundle that does not load is an *Error as for an upload; one that fails
// the gate is answered, with the failing cases in Gate.
func (c *Client) DryRunBundle(ctx context.Context, archive []byte) (BundlePreview, error) {
	var p BundlePreview
	err := c.call(ctx, http.MethodPost, "/v1/bundles", url.Values{"dry_run": {"true"}}, gzipBody(archive), &p)
	return p, err
}

// ApproveBundle is a second operator's approval of a bundle that awaits
// one: it goes live, through the gate again (the operator who proposed
// it is refused, 403 same_operator).
func (c *Client) ApproveBundle(ctx context.Context, digest string) (Activation, error) {
	return c.activate(ctx, "/v1/bundles/"+seg(digest)+"/approve", nil, nil)
}

// ActivateBundle activates again a bundle the history holds (a rollback),
// under the same gate and rules as an upload: a rollback that loosens a
// limit waits for a second operator.
func (c *Client) ActivateBundle(ctx context.Context, digest string) (Activation, error) {
	return c.activate(ctx, "/v1/bundles/"+seg(digest)+"/activate", nil, nil)
}

// activate sends an activation and reads its 201 or 202.
func (c *Client) activate(ctx context.Context, path string, q url.Values, body any) (Activation, error) {
	var raw json.RawMessage
	a, err := c.do(ctx, http.MethodPost, path, q, body, &raw)
	if err != nil {
		return Activation{}, err
	}
	var act Activation
	if a.status == http.StatusAccepted {
		act.Awaiting = new(AwaitingBundle)
		err = c.decode(raw, act.Awaiting)
	} else {
		act.Active = new(Bundle)
		err = c.decode(raw, act.Active)
	}
	if err != nil {
		return Activation{}, err
	}
	return act, nil
}

// Activation is what an upload, an approval or a rollback came to: the
// bundle's record now that it is active (201), or, when it must wait for
// a second operator (202), what that operator is shown. One of the two is
// set.
type Activation struct {
	Active   *Bundle
	Awaiting *AwaitingBundle
}

// BundleStatus is the standing of one activation attempt.
type BundleStatus string

// The bundle statuses. Awaiting: not a pure tightening of the bundle it
// replaces (or it breaks the glass), waiting for a second operator;
// approved: a second operator approved it, and its activation is the next
// record of the same digest.
const (
	BundleActive     BundleStatus = "active"
	BundleSuperseded BundleStatus = "superseded"
	BundleRejected   BundleStatus = "rejected"
	BundleAwaiting   BundleStatus = "awaiting_second_operator"
	BundleApproved   BundleStatus = "approved"
)

// Bundle is one activation attempt as the history records it. Failures is
// null for a record kept without any (an activation). The review is
// absent from the history's list and from a record kept without one.
type Bundle struct {
	Seq      uint64       `json:"seq"`
	Revision string       `json:"revision"`
	Digest   string       `json:"digest"`
	Status   BundleStatus `json:"status"`
	By       string       `json:"by"`
	// Proposer is the operator who proposed it, when By is the second
	// operator who approved it.
	Proposer   string    `json:"proposer,omitempty"`
	At         time.Time `json:"at"`
	BreakGlass bool      `json:"break_glass,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	// Rollback: activated again by ActivateBundle.
	Rollback     bool          `json:"rollback,omitempty"`
	LimitChanges []LimitChange `json:"limit_changes,omitempty"`
	Failures     []GateCase    `json:"failures"`
	TestFailures []string      `json:"test_failures,omitempty"`
	// Impact is the replay of recent decisions against the bundle, when
	// one was made.
	Impact *Impact `json:"impact,omitempty"`
	Review
}

// GateCase is one failing gate case of a recorded attempt.
type GateCase struct {
	Case         string      `json:"case"`
	Amount       money.Cents `json:"amount"`
	Expected     string      `json:"expected"`
	Got          string      `json:"got"`
	ExpectedRule string      `json:"expected_rule,omitempty"`
	GotRule      string      `json:"got_rule,omitempty"`
}

// LimitChange is one limit a bundle changes, in the limit's units (cents,
// or seconds for the *_seconds limits): a key of data.countersign.limits,
// or bounds.<member> / breaker.<member>.
type LimitChange struct {
	Name string `json:"name"`
	From int64  `json:"from"`
	To   int64  `json:"to"`
}

// AwaitingBundle is a bundle that waits for a second operator, with what
// they are shown: the declared limit changes that loosen ([] when none
// does), the replay of recent decisions and the review.
type AwaitingBundle struct {
	Status       BundleStatus  `json:"status"`
	Revision     string        `json:"revision"`
	Digest       string        `json:"digest"`
	LimitChanges []LimitChange `json:"limit_changes"`
	Message      string        `json:"message"`
	Impact       *Impact       `json:"impact,omitempty"`
	Review
}

// BundlePreview is a dry run of an upload: the gate's report, the replay
// of recent decisions and the review a second operator would see.
type BundlePreview struct {
	Gate   GateReport `json:"gate"`
	Impact Impact     `json:"impact"`
	Review
}

// GateReport is what the gate found, as activation would run it now.
type GateReport struct {
	Revision string `json:"revision"`
	Digest   string `json:"digest"`
	// Limits are the limits in force, at which the boundary cases ran.
	Limits Limits `json:"limits"`
	// LimitChanges are the changes the bundle declares, correct or not.
	LimitChanges []LimitChange `json:"limit_changes,omitempty"`
	// LimitFailures: one per limit that differs from the bundle in force
	// without a matching declaration.
	LimitFailures []GateResult `json:"limit_failures,omitempty"`
	// Cases are every boundary case in table order, passing or not.
	Cases        []GateResult `json:"cases"`
	TestsPassed  int          `json:"tests_passed"`
	TestFailures []string     `json:"test_failures,omitempty"`
}

// GateResult is one case of the gate: what the bundle was expected to
// decide and what it decided.
type GateResult struct {
	Case         string      `json:"case"`
	Amount       money.Cents `json:"amount"`
	Expected     string      `json:"expected"`
	Got          string      `json:"got"`
	ExpectedRule string      `json:"expected_rule,omitempty"`
	GotRule      string      `json:"got_rule,omitempty"`
	// Error: the bundle could not answer at all, which fails the case.
	Error string `json:"error,omitempty"`
}

// Limits are a bundle's limits (data.countersign.limits): money in cents,
// windows and lifetimes in seconds.
type Limits struct {
	RefundAuto          money.Cents `json:"refund_auto"`
	RefundMax           money.Cents `json:"refund_max"`
	ReshipApprovalValue money.Cents `json:"reship_approval_value"`
	RepDaily            money.Cents `json:"rep_daily"`
	RepWindowSeconds    int64       `json:"rep_window_seconds"`
	AgentHourly         money.Cents `json:"agent_hourly"`
	ApprovalTTLSeconds  int64       `json:"approval_ttl_seconds"`
	TokenTTLSeconds     int64       `json:"token_ttl_seconds"`
}

// Impact is the most recent decisions replayed against a bundle with the
// inputs recorded at the time: the groups that would come out otherwise,
// the largest first ([] when none would).
type Impact struct {
	Replayed int `json:"replayed"`
	// Skipped decisions were logged without their input.
	Skipped int            `json:"skipped"`
	Changed []ImpactChange `json:"changed"`
	// ChangedAmount is the sum of the changed decisions' amounts (a call
	// without one, a reship, adds zero); 0 in a record kept before
	// amounts were summed.
	ChangedAmount money.Cents `json:"changed_amount"`
	// RuleChanged are the groups of decisions that would come out the
	// same by another rule, the largest first: [] when none would, null
	// in a record kept before they were counted.
	RuleChanged []ImpactRuleChange `json:"rule_changed"`
}

// ImpactChange is a group of decisions that were From and would be To, by
// the bundle's Rule.
type ImpactChange struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Rule  string `json:"rule"`
	Count int    `json:"count"`
	// Amount is the sum of the group's amounts.
	Amount   money.Cents     `json:"amount"`
	Examples []ImpactExample `json:"examples"`
}

// ImpactRuleChange is a group of decisions that were Decision by FromRule
// and would be Decision still, by the bundle's ToRule.
type ImpactRuleChange struct {
	Decision string          `json:"decision"`
	FromRule string          `json:"from_rule"`
	ToRule   string          `json:"to_rule"`
	Count    int             `json:"count"`
	Amount   money.Cents     `json:"amount"`
	Examples []ImpactExample `json:"examples"`
}

// ImpactExample is one decision of an ImpactChange.
type ImpactExample struct {
	DecisionID string      `json:"decision_id"`
	Workflow   string      `json:"workflow"`
	N          int         `json:"n"`
	Order      string      `json:"order"`
	Amount     money.Cents `json:"amount,omitempty"`
}

// Review is what a second operator is shown of a bundle: how it differs
// from the bundle it would replace and what it newly allows. Every member
// is absent from a record kept without a review.
type Review struct {
	// Against is the bundle compared with: the active one, or the
	// baseline release when none is.
	Against BundleRef `json:"against,omitzero"`
	// SecondOperator says why the bundle needs a second operator, one
	// reason a line; [] for a pure tightening.
	SecondOperator []string `json:"second_operator,omitzero"`
	// Diff is each Rego file that differs, tests included, by path.
	Diff []ModuleDiff `json:"diff,omitzero"`
	// DataDiff is each value of the data document that differs, by path.
	DataDiff      []DataChange `json:"data_diff,omitzero"`
	NewAllowances Allowances   `json:"new_allowances,omitzero"`
}

// BundleRef names a bundle.
type BundleRef struct {
	Revision string `json:"revision"`
	Digest   string `json:"digest"`
}

// ModuleDiff is one Rego file whose text differs.
type ModuleDiff struct {
	// Path is the file in the candidate (in the bundle replaced when
	// removed); OldPath the file of the same package it is compared with,
	// when its path differs.
	Path    string `json:"path"`
	OldPath string `json:"old_path,omitzero"`
	// Change is added, removed or modified.
	Change string `json:"change"`
	// Test: a *_test.rego file, which no decision evaluates.
	Test bool `json:"test,omitzero"`
	// PolicyChanged is false for a file that differs only in layout or
	// comments, and for a test.
	PolicyChanged bool `json:"policy_changed"`
	// Unified is the diff as diff -u writes it, a file added or removed
	// shown whole; Truncated when the review's diffs stop within it.
	Unified   string `json:"unified"`
	Truncated bool   `json:"truncated,omitzero"`
}

// DataChange is one value of the data document that differs.
type DataChange struct {
	// Path is as Rego refers to it: data.countersign.limits.refund_auto.
	Path string `json:"path"`
	// Old is absent for a key added, New for a key removed.
	Old json.RawMessage `json:"old,omitempty"`
	New json.RawMessage `json:"new,omitempty"`
	// Change is added, removed, tightens, loosens (a number of the limit
	// table, named by Limit) or changed (any other value).
	Change string `json:"change"`
	Limit  string `json:"limit,omitempty"`
}

// Allowances are the generated inputs on which the candidate is more
// permissive than the bundle it replaces: how many, of how many
// evaluated, with examples.
type Allowances struct {
	Count     int         `json:"count"`
	Evaluated int         `json:"evaluated"`
	Examples  []Allowance `json:"examples"`
	// Incomplete says why the evaluation stopped short; Skipped why
	// nothing was evaluated (the same rules on the same data).
	Incomplete string `json:"incomplete,omitzero"`
	Skipped    string `json:"skipped,omitzero"`
}

// Allowance is one input the candidate answers more permissively.
type Allowance struct {
	// Kind is "call" (the call policy) or "approver" (the approver rules).
	Kind string `json:"kind"`
	// Input is the input as the policy sees it.
	Input     json.RawMessage `json:"input"`
	Active    Verdict         `json:"active"`
	Candidate Verdict         `json:"candidate"`
}

// Verdict is one bundle's answer: a call's decision and rule, or an
// approval's "allowed" or "refused" and the refusal's code. Error: the
// bundle could not answer, and the verdict is the fail-closed one.
type Verdict struct {
	Decision string `json:"decision"`
	Rule     string `json:"rule,omitzero"`
	Error    string `json:"error,omitzero"`
}
