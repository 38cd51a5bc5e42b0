package policy_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/bundles/loosen"
	"github.com/countersign/countersign/executor/policy"
)

// Compare reads data by path, value by value: numbers by value, a list as
// one value, and says which way a limit of the table moved.
func TestCompareData(t *testing.T) {
	p1 := embedded(t, "p1")
	tests := []struct {
		name string
		data string
		want []policy.DataChange
	}{
		{"a limit lowered", p1Data(t, map[string]int64{"refund_max": 40000}, ""), []policy.DataChange{
			{Path: "data.countersign.limits.refund_max", Old: raw("50000"), New: raw("40000"), Change: policy.DataTightens, Limit: "refund_max"}}},
		{"a window lengthened", p1Data(t, map[string]int64{"rep_window_seconds": 90000}, ""), []policy.DataChange{
			{Path: "data.countersign.limits.rep_window_seconds", Old: raw("86400"), New: raw("90000"), Change: policy.DataTightens, Limit: "rep_window_seconds"}}},
		{"a key added with a list and an odd name", p1Data(t, nil, `"vip reps": ["rep-ana"]`), []policy.DataChange{
			{Path: `data.countersign["vip reps"]`, New: raw(`["rep-ana"]`), Change: policy.DataAdded}}},
		{"an empty object is a value", p1Data(t, nil, `"modes": {}`), []policy.DataChange{
			{Path: "data.countersign.modes", New: raw(`{}`), Change: policy.DataAdded}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := policy.Compare(p1, p1With(t, "t", nil, tt.data))
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Modules) != 0 || !reflect.DeepEqual(c.Data, tt.want) {
				t.Errorf("modules %+v data %s\nwant data %s", c.Modules, show(c.Data), show(tt.want))
			}
			if c.PureTightening() != (len(tt.want) == 0 || tt.want[0].Change == policy.DataTightens) {
				t.Errorf("pure tightening %v with reasons %q", c.PureTightening(), c.Reasons())
			}
		})
	}

	// The same number written otherwise is the same value.
	one := p1With(t, "one", nil, p1Data(t, nil, `"ratio": 1`))
	if c, err := policy.Compare(one, p1With(t, "t", nil, p1Data(t, nil, `"ratio": 1.0`))); err != nil || len(c.Data) != 0 {
		t.Errorf("1 and 1.0: %+v %v", c.Data, err)
	}

	// A list changed in one element, and a value removed, over a bundle
	// that has both.
	listed := p1With(t, "listed", nil, p1Data(t, nil, `"vip": ["rep-ana", "rep-ben"], "modes": {"issue_refund": "auto"}`))
	c, err := policy.Compare(listed, p1With(t, "t", nil, p1Data(t, nil, `"vip": ["rep-ana"]`)))
	if err != nil {
		t.Fatal(err)
	}
	want := []policy.DataChange{
		{Path: "data.countersign.modes.issue_refund", Old: raw(`"auto"`), Change: policy.DataRemoved},
		{Path: "data.countersign.vip", Old: raw(`["rep-ana","rep-ben"]`), New: raw(`["rep-ana"]`), Change: policy.DataChanged},
	}
	if !reflect.DeepEqual(c.Data, want) {
		t.Errorf("data %s\nwant %s", show(c.Data), show(want))
	}
	if got := c.Reasons(); len(got) != 2 || !strings.Contains(got[1], "is not a limit") {
		t.Errorf("reasons %q", got)
	}
}

// Modules are compared as parsed, whatever their file names: the same
// rules under another path are no change; a module that is not a test is
// policy even beside the tests.
func TestCompareModules(t *testing.T) {
	p1 := embedded(t, "p1")
	moved, err := bundles.Variant("p1", "moved", func(s string) string { return s }, nil)
	if err != nil {
		t.Fatal(err)
	}
	moved["policy/call.rego"] = moved["call/call.rego"]
	delete(moved, "call/call.rego")
	b, err := policy.LoadFS(moved)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := policy.Compare(p1, b); err != nil || !c.PureTightening() {
		t.Errorf("call.rego moved: %+v %v", c, err)
	}
	c, err := policy.Compare(p1, p1With(t, "t", loosen.SpareBen, p1Data(t, nil, "")))
	if err != nil {
		t.Fatal(err)
	}
	if want := []policy.ModuleChange{{Path: "/call/call.rego", Change: policy.ModuleChanged}}; !reflect.DeepEqual(c.Modules, want) {
		t.Errorf("modules %+v, want %+v", c.Modules, want)
	}
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
