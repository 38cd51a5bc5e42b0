package sidecar_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/tool"
)

// lineEntry is a ledger entry with the line it refunded.
type lineEntry struct {
	Order    string `json:"order"`
	Amount   int64  `json:"amount"`
	Line     string `json:"line"`
	Quantity int64  `json:"quantity"`
}

func (e *env) lineEntries(t *testing.T) []lineEntry {
	t.Helper()
	var b struct {
		Entries []lineEntry `json:"entries"`
	}
	if err := json.Unmarshal(e.sim(t, http.MethodGet, e.st.Endpoints.Ledger+"/entries", nil, http.StatusOK), &b); err != nil {
		t.Fatal(err)
	}
	return b.Entries
}

// lineArgs are the args of a line-item refund of O-1001, the seed's order:
// L1 is the annual plan ($108), L2 the $12 add-on.
func lineArgs(line string, quantity, amount int64) map[string]any {
	a := map[string]any{"order": "O-1001", "line": line, "quantity": quantity}
	if amount != 0 {
		a["amount"] = amount
	}
	return a
}

// TestSeedAddOnTicket is the seed's example: the ticket reports that the
// $12 add-on failed, and the agent names the annual plan's line with the
// add-on's $12. The engine refuses it (422 amount_mismatch: the record
// prices that line at $108), and so does the ledger when a token for
// exactly that call reaches it (what an engine without the check would
// send): the order system prices the plan's line, not the agent. The
// add-on's own line is then refunded at the record's price, and the order
// system counts it.
func TestSeedAddOnTicket(t *testing.T) {
	e := start(t, devstack.Options{})
	e.open(t, "rep-ana", "W1")

	r, _ := e.propose(t, "rep-ana", "W1", "issue_refund", lineArgs("L1", 1, 1200))
	r.want(t, http.StatusUnprocessableEntity, "amount_mismatch")
	if n := len(e.lineEntries(t)); n != 0 {
		t.Fatalf("the wrong line made %d ledger entries", n)
	}

	// The ledger, on its own: a token bound to the plan's line at $12.
	wrong := tool.Args{Order: "O-1001", Line: "L1", Quantity: 1, Amount: 1200}
	rep := person(t, "rep-ana")
	token, err := e.st.Authority.Mint(context.Background(), credential.Claims{
		Subject: rep.ID, Agent: devstack.AgentID, Audience: "ledger", Scope: "refund", Max: rep.RefundCeiling,
		Call: tool.CallHash(tool.IssueRefund, wrong), Key: "cs-wrong-line", Line: wrong.Line, Quantity: wrong.Quantity,
	})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, e.st.Endpoints.Ledger+"/refunds",
		bytes.NewReader([]byte(`{"order":"O-1001","amount":1200,"line":"L1","quantity":1}`)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Idempotency-Key", "cs-wrong-line")
	res, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusConflict || !bytes.Contains(body, []byte(`"line_amount_mismatch"`)) {
		t.Fatalf("ledger answered %d %s, want 409 line_amount_mismatch", res.StatusCode, body)
	}

	r, s := e.propose(t, "rep-ana", "W1", "issue_refund", lineArgs("L2", 1, 0))
	r.want(t, http.StatusOK, "")
	if s.Status != "done" || s.Args["amount"] != float64(1200) {
		t.Fatalf("the add-on's line: step %s with args %v, want done at 1200 cents", s.Status, s.Args)
	}
	if got := e.lineEntries(t); len(got) != 1 || got[0] != (lineEntry{Order: "O-1001", Amount: 1200, Line: "L2", Quantity: 1}) {
		t.Fatalf("ledger %+v, want one entry of line L2 for $12", got)
	}
	r, s = e.propose(t, "rep-ana", "W1", "lookup_order", map[string]any{"order": "O-1001"})
	r.want(t, http.StatusOK, "")
	var o struct {
		Lines []struct {
			ID               string `json:"id"`
			RefundedQuantity int64  `json:"refunded_quantity"`
		} `json:"lines"`
	}
	if err := json.Unmarshal(s.Result, &o); err != nil || len(o.Lines) != 2 || o.Lines[1].RefundedQuantity != 1 || o.Lines[0].RefundedQuantity != 0 {
		t.Fatalf("the order after the refund: %s (%v), want L2 refunded once and L1 not", s.Result, err)
	}
}

// refundAddOnTwice refunds O-1001's add-on line in W1 and asks for it
// again in W2, and returns W2's answer.
func refundAddOnTwice(t *testing.T, e *env) (reply, step) {
	t.Helper()
	e.open(t, "rep-ana", "W1")
	r, _ := e.propose(t, "rep-ana", "W1", "issue_refund", lineArgs("L2", 1, 0))
	r.want(t, http.StatusOK, "")
	e.open(t, "rep-ana", "W2")
	return e.propose(t, "rep-ana", "W2", "issue_refund", lineArgs("L2", 1, 0))
}

// TestRefundedLineUnderP1: bundle p1 knows no lines, and $12 is within
// every limit it has; the engine applies R12 itself, so the second refund
// of the add-on's only unit is denied before anything is dispatched. The
// ledger refuses it on its own too (a token for exactly that call, as an
// engine without the rule would send): the order system has nothing left
// to refund on that line.
func TestRefundedLineUnderP1(t *testing.T) {
	e := start(t, devstack.Options{})
	r, s := refundAddOnTwice(t, e)
	if r.status != http.StatusForbidden || s.Status != "denied" || s.Rule != "R12-line-not-refundable" {
		t.Fatalf("second refund of the add-on: %d %s", r.status, r.body)
	}
	if n := len(e.lineEntries(t)); n != 1 {
		t.Fatalf("%d ledger entries, want the first refund's only", n)
	}
	again := tool.Args{Order: "O-1001", Line: "L2", Quantity: 1, Amount: 1200}
	rep := person(t, "rep-ana")
	token, err := e.st.Authority.Mint(context.Background(), credential.Claims{
		Subject: rep.ID, Agent: devstack.AgentID, Audience: "ledger", Scope: "refund", Max: rep.RefundCeiling,
		Call: tool.CallHash(tool.IssueRefund, again), Key: "cs-again", Line: again.Line, Quantity: again.Quantity,
	})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, e.st.Endpoints.Ledger+"/refunds",
		bytes.NewReader([]byte(`{"order":"O-1001","amount":1200,"line":"L2","quantity":1}`)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Idempotency-Key", "cs-again")
	res, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusConflict || !bytes.Contains(body, []byte(`"line_not_refundable"`)) {
		t.Fatalf("ledger answered %d %s, want 409 line_not_refundable", res.StatusCode, body)
	}
}

// TestUnpricedLineUnderP1: a line the order does not have, or more units
// than it has, is R12 under p1 too, not an amount over the ceiling.
func TestUnpricedLineUnderP1(t *testing.T) {
	e := start(t, devstack.Options{})
	e.open(t, "rep-ana", "W1")
	for _, args := range []map[string]any{lineArgs("L99", 1, 0), lineArgs("L2", 999, 0)} {
		r, s := e.propose(t, "rep-ana", "W1", "issue_refund", args)
		if r.status != http.StatusForbidden || s.Rule != "R12-line-not-refundable" {
			t.Errorf("%v: %d %s, want 403 R12-line-not-refundable", args, r.status, r.body)
		}
	}
}

// TestR12FromRego: a bundle built from rego/ (with p1's data) carries R12;
// activated over the API, it denies the second refund of the add-on's
// only unit before anything is dispatched, and a quantity above the line's
// on an order with units left.
func TestR12FromRego(t *testing.T) {
	p1, err := bundles.Open("p1")
	if err != nil {
		t.Fatal(err)
	}
	data, err := fs.ReadFile(p1, "data.json")
	if err != nil {
		t.Fatal(err)
	}
	src, err := policy.Source(os.DirFS(filepath.Join("..", "rego")), data, "source-r12", nil)
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, devstack.Options{})
	e.activateByTwo(t, packed(t, src))

	r, s := refundAddOnTwice(t, e)
	if r.status != http.StatusForbidden || s.Status != "denied" || s.Rule != "R12-line-not-refundable" {
		t.Fatalf("second refund of the add-on: %d %s", r.status, r.body)
	}
	e.open(t, "rep-ana", "W3")
	r, s = e.propose(t, "rep-ana", "W3", "issue_refund", map[string]any{"order": "O-1002", "line": "L2", "quantity": 4})
	if r.status != http.StatusForbidden || s.Rule != "R12-line-not-refundable" {
		t.Fatalf("4 of a line of 3: %d %s", r.status, r.body)
	}
	if n := len(e.lineEntries(t)); n != 1 {
		t.Fatalf("%d ledger entries, want the first refund's only", n)
	}
}
