package policy_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/executor/fixture"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/tool"
)

var (
	repAna = person("rep-ana")
	repCy  = person("rep-cy")
)

// twoOperators activates a bundle as ops-jon approving what ops-ida
// proposed: for the tests of other controls, whose bundles change rules
// and so are never a pure tightening.
var twoOperators = policy.Activation{By: "ops-jon", Proposer: "ops-ida"}

func person(id string) *policy.User {
	p, ok := fixture.PersonByID(id)
	if !ok {
		panic("no fixture person " + id)
	}
	return &policy.User{ID: p.ID, Role: p.Role, Region: p.Region, Scopes: p.Scopes, RefundCeiling: p.RefundCeiling}
}

func approver(id string) policy.Approver {
	p, ok := fixture.PersonByID(id)
	if !ok {
		panic("no fixture person " + id)
	}
	return policy.Approver{ID: p.ID, Role: p.Role, Region: p.Region, ApproveLimit: p.ApproveLimit}
}

func order(id string) *policy.Order {
	for _, o := range fixture.Orders() {
		if o.ID == id {
			return &policy.Order{ID: o.ID, Region: o.Region, Customer: o.Customer, Paid: o.Paid, Status: o.Status}
		}
	}
	panic("no fixture order " + id)
}

// refund is a refund by user on a fixture order with nothing spent yet.
func refund(user *policy.User, orderID string, amount money.Cents) policy.Input {
	return policy.Input{
		User:  user,
		Tool:  tool.IssueRefund,
		Args:  tool.Args{Order: orderID, Amount: amount},
		Order: order(orderID),
	}
}

// bigRefund is a refund by rep-ana on an order paid $1,000.00, so that only
// the refund limits can decide it.
func bigRefund(amount money.Cents) policy.Input {
	return policy.Input{
		User:  repAna,
		Tool:  tool.IssueRefund,
		Args:  tool.Args{Order: "O-9001", Amount: amount},
		Order: &policy.Order{ID: "O-9001", Region: "EU", Customer: "customer-9", Paid: 100000, Status: "shipped"},
	}
}

// reship is a reship by rep-ana of a fixture order that was reshipped n
// times before, in any workflow.
func reship(orderID string, n int) policy.Input {
	return policy.Input{
		User:   repAna,
		Tool:   tool.ReshipOrder,
		Args:   tool.Args{Order: orderID},
		Order:  order(orderID),
		Totals: policy.Totals{OrderReships: n},
	}
}

func embedded(t testing.TB, name string) *policy.Bundle {
	t.Helper()
	dir, err := bundles.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	b, err := policy.LoadFS(dir)
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	return b
}

// baseline is the reference of a gate with no bundle active: p1's limits.
func baseline(t testing.TB) policy.Limits {
	t.Helper()
	l, err := policy.BaselineLimits()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// The limits of p1 as bundle data.
const (
	p1LimitsObject = `{"refund_auto": 5000, "refund_max": 50000,
  "reship_approval_value": 30000, "rep_daily": 100000, "rep_window_seconds": 86400,
  "agent_hourly": 300000, "approval_ttl_seconds": 900, "token_ttl_seconds": 60}`
	p1Limits = `{"countersign": {"limits": ` + p1LimitsObject + `}}`
)

func regoSource(t testing.TB, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "rego", rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// customBundle is a bundle with the real approver policy, the given call
// policy and data, and any extra files.
func customBundle(t testing.TB, revision, callRego, data string, extra map[string]string) *policy.Bundle {
	t.Helper()
	b, err := policy.LoadFS(customFS(t, revision, callRego, data, extra))
	if err != nil {
		t.Fatalf("load %s: %v", revision, err)
	}
	return b
}

func customFS(t testing.TB, revision, callRego, data string, extra map[string]string) fstest.MapFS {
	t.Helper()
	fsys := fstest.MapFS{
		".manifest":              {Data: []byte(`{"revision": "` + revision + `", "roots": ["countersign"], "rego_version": 1}`)},
		"data.json":              {Data: []byte(data)},
		"call/call.rego":         {Data: []byte(callRego)},
		"approver/approver.rego": {Data: []byte(regoSource(t, "approver/approver.rego"))},
	}
	for name, body := range extra {
		fsys[name] = &fstest.MapFile{Data: []byte(body)}
	}
	return fsys
}

// entry is one member of a hand-made archive.
type entry struct {
	name string
	body string
	kind byte // tar.TypeReg when zero
}

func tarGz(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: e.kind}
		if e.kind == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag != tar.TypeReg {
			h.Size, h.Linkname = 0, "/etc/passwd"
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func fsReadFile(fsys fs.FS, name string) (string, error) {
	b, err := fs.ReadFile(fsys, name)
	return string(b), err
}
