package tool_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/countersign/countersign/executor/strictjson"
	"github.com/countersign/countersign/executor/tool"
)

func TestNormalize(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tool    tool.Name
		raw     string
		want    tool.Args
		wantErr string // the SchemaError field, "" for the object itself; "-" for success; "!" for strictjson.ErrMalformed
	}{
		{"refund", tool.IssueRefund, `{"order":"O-1001","amount":3000}`, tool.Args{Order: "O-1001", Amount: 3000}, "-"},
		{"refund with spaces", tool.IssueRefund, ` { "amount" : 1 , "order" : "O-1" } `, tool.Args{Order: "O-1", Amount: 1}, "-"},
		{"reship", tool.ReshipOrder, `{"order":"O-1004"}`, tool.Args{Order: "O-1004"}, "-"},
		{"approval claimed in args", tool.IssueRefund, `{"order":"O-1002","amount":12000,"approved_by":"lead-dee"}`, tool.Args{}, "approved_by"},
		{"amount on reship", tool.ReshipOrder, `{"order":"O-1004","amount":1}`, tool.Args{}, "amount"},
		{"fractional cents", tool.IssueRefund, `{"order":"O-1001","amount":30.5}`, tool.Args{}, "amount"},
		{"float spelled integer", tool.IssueRefund, `{"order":"O-1001","amount":3000.0}`, tool.Args{}, "amount"},
		{"exponent", tool.IssueRefund, `{"order":"O-1001","amount":3e3}`, tool.Args{}, "amount"},
		{"string amount", tool.IssueRefund, `{"order":"O-1001","amount":"3000"}`, tool.Args{}, "amount"},
		{"zero", tool.IssueRefund, `{"order":"O-1001","amount":0}`, tool.Args{}, "amount"},
		{"negative", tool.IssueRefund, `{"order":"O-1001","amount":-5}`, tool.Args{}, "amount"},
		{"above 2^53-1", tool.IssueRefund, `{"order":"O-1001","amount":9007199254740992}`, tool.Args{}, "amount"},
		{"overflow", tool.IssueRefund, `{"order":"O-1001","amount":99999999999999999999}`, tool.Args{}, "amount"},
		{"missing amount", tool.IssueRefund, `{"order":"O-1001"}`, tool.Args{}, "amount"},
		{"null amount", tool.IssueRefund, `{"order":"O-1001","amount":null}`, tool.Args{}, "amount"},
		{"bad order id", tool.IssueRefund, `{"order":"1001","amount":1}`, tool.Args{}, "order"},
		{"order id too long", tool.ReshipOrder, `{"order":"O-1234567890123"}`, tool.Args{}, "order"},
		{"order id with newline", tool.ReshipOrder, `{"order":"O-1\n"}`, tool.Args{}, "order"},
		{"numeric order", tool.ReshipOrder, `{"order":1001}`, tool.Args{}, "order"},
		{"a duplicate amount is malformed", tool.IssueRefund, `{"order":"O-1001","amount":1,"amount":99999}`, tool.Args{}, "!"},
		{"a duplicate order is malformed", tool.ReshipOrder, `{"order":"O-1","order":"O-2"}`, tool.Args{}, "!"},
		{"a case-variant duplicate of order is malformed", tool.ReshipOrder, `{"order":"O-1","ORDER":"O-2"}`, tool.Args{}, "!"},
		{"a capitalised order is malformed", tool.LookupOrder, `{"Order":"O-1"}`, tool.Args{}, "!"},
		{"a capitalised amount is malformed", tool.IssueRefund, `{"order":"O-1","Amount":3000}`, tool.Args{}, "!"},
		{"a case variant is malformed even when the order id is also bad", tool.IssueRefund, `{"order":"bad","AMOUNT":3000}`, tool.Args{}, "!"},
		{"a duplicate inside an unknown field is malformed", tool.ReshipOrder, `{"order":"O-1","x":{"a":1,"a":2}}`, tool.Args{}, "!"},
		{"a capitalised amount on a reship is an unknown field", tool.ReshipOrder, `{"order":"O-1","Amount":1}`, tool.Args{}, "Amount"},
		{"line refund", tool.IssueRefund, `{"order":"O-1001","line":"L2","quantity":1}`, tool.Args{Order: "O-1001", Line: "L2", Quantity: 1}, "-"},
		{"line refund with the expected amount", tool.IssueRefund, `{"order":"O-1001","line":"L2","quantity":2,"amount":2400}`, tool.Args{Order: "O-1001", Line: "L2", Quantity: 2, Amount: 2400}, "-"},
		{"line without quantity", tool.IssueRefund, `{"order":"O-1001","line":"L2"}`, tool.Args{}, "quantity"},
		{"quantity without line", tool.IssueRefund, `{"order":"O-1001","quantity":1,"amount":1200}`, tool.Args{}, "line"},
		{"zero quantity", tool.IssueRefund, `{"order":"O-1001","line":"L2","quantity":0}`, tool.Args{}, "quantity"},
		{"fractional quantity", tool.IssueRefund, `{"order":"O-1001","line":"L2","quantity":1.5}`, tool.Args{}, "quantity"},
		{"quantity above a million", tool.IssueRefund, `{"order":"O-1001","line":"L2","quantity":1000001}`, tool.Args{}, "quantity"},
		{"numeric line", tool.IssueRefund, `{"order":"O-1001","line":2,"quantity":1}`, tool.Args{}, "line"},
		{"line with a slash", tool.IssueRefund, `{"order":"O-1001","line":"L/2","quantity":1}`, tool.Args{}, "line"},
		{"a line with a zero amount", tool.IssueRefund, `{"order":"O-1001","line":"L2","quantity":1,"amount":0}`, tool.Args{}, "amount"},
		{"a line on a reship is an unknown field", tool.ReshipOrder, `{"order":"O-1001","line":"L2"}`, tool.Args{}, "line"},
		{"a capitalised line is malformed", tool.IssueRefund, `{"order":"O-1","Line":"L2","quantity":1}`, tool.Args{}, "!"},
		{"array", tool.IssueRefund, `[1,2]`, tool.Args{}, ""},
		{"null", tool.IssueRefund, `null`, tool.Args{}, ""},
		{"trailing data is malformed", tool.IssueRefund, `{"order":"O-1001","amount":1}{}`, tool.Args{}, "!"},
		{"empty", tool.IssueRefund, ``, tool.Args{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tool.Normalize(tc.tool, json.RawMessage(tc.raw))
			if tc.wantErr == "-" {
				if err != nil || got != tc.want {
					t.Fatalf("Normalize = %+v, %v; want %+v", got, err, tc.want)
				}
				return
			}
			if tc.wantErr == "!" {
				var se *tool.SchemaError
				if !errors.Is(err, strictjson.ErrMalformed) || errors.As(err, &se) {
					t.Fatalf("Normalize error = %v; want strictjson.ErrMalformed", err)
				}
				return
			}
			var se *tool.SchemaError
			if !errors.As(err, &se) || se.Field != tc.wantErr {
				t.Fatalf("Normalize error = %v; want a SchemaError on field %q", err, tc.wantErr)
			}
		})
	}
}

func TestNormalizeUnknownTool(t *testing.T) {
	_, err := tool.Normalize("delete_customer", json.RawMessage(`{"order":"O-1"}`))
	if !errors.Is(err, tool.ErrUnknownTool) {
		t.Fatalf("err = %v, want ErrUnknownTool", err)
	}
}

func TestLenientKeepsExtras(t *testing.T) {
	a, extra, err := tool.Lenient(tool.IssueRefund, json.RawMessage(`{"order":"O-1002","amount":12000,"approved_by":"lead-dee"}`))
	if err != nil || a.Amount != 12000 || string(extra["approved_by"]) != `"lead-dee"` {
		t.Fatalf("Lenient = %+v %v %v", a, extra, err)
	}
}

func TestLenientStillRefusesMalformedArgs(t *testing.T) {
	for _, raw := range []string{`{"order":"O-1002","Order":"O-1003","amount":1}`, `{"order":"O-1002","amount":1,"approved_by":"a","approved_by":"b"}`} {
		if _, _, err := tool.Lenient(tool.IssueRefund, json.RawMessage(raw)); !errors.Is(err, strictjson.ErrMalformed) {
			t.Errorf("Lenient(%s) = %v, want ErrMalformed", raw, err)
		}
	}
}

func TestCanonicalAndCallHash(t *testing.T) {
	a := tool.Args{Order: "O-1001", Amount: 3000}
	if got := string(tool.Canonical(tool.IssueRefund, a)); got != `{"amount":3000,"order":"O-1001"}` {
		t.Fatalf("canonical refund = %s", got)
	}
	if got := string(tool.Canonical(tool.ReshipOrder, tool.Args{Order: "O-1004"})); got != `{"order":"O-1004"}` {
		t.Fatalf("canonical reship = %s", got)
	}
	line := tool.Args{Order: "O-1001", Line: "L2", Quantity: 1, Amount: 1200}
	if got := string(tool.Canonical(tool.IssueRefund, line)); got != `{"amount":1200,"line":"L2","order":"O-1001","quantity":1}` {
		t.Fatalf("canonical line refund = %s", got)
	}
	if tool.CallHash(tool.IssueRefund, line) == tool.CallHash(tool.IssueRefund, tool.Args{Order: "O-1001", Amount: 1200}) {
		t.Fatal("a line refund hashes like an amount refund of the same amount")
	}
	// The hash is pinned: the systems of record recompute it independently.
	const want = "53238c52084c58b6b08f4f8b003be330a393a775e4dfa596bd2634271410ff8d"
	if got := tool.CallHash(tool.IssueRefund, a); len(got) != 64 {
		t.Fatalf("CallHash length %d", len(got))
	} else if got != want {
		t.Logf("CallHash = %s (update the pinned value if the canonical form changed on purpose)", got)
		t.Fail()
	}
	if tool.CallHash(tool.IssueRefund, a) == tool.CallHash(tool.IssueRefund, tool.Args{Order: "O-1001", Amount: 30000}) {
		t.Fatal("different amounts hash alike")
	}
}

func FuzzNormalize(f *testing.F) {
	for _, s := range []string{`{"order":"O-1001","amount":3000}`, `{"order":"O-1001","line":"L2","quantity":3}`, `{"order":"O-1"}`, `{"amount":1e3}`, `[]`, `{"order":"O-1","order":"O-2"}`, `{"Order":"O-1","amount":1}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		a, err := tool.Normalize(tool.IssueRefund, json.RawMessage(raw))
		if err != nil {
			return
		}
		if a.Amount <= 0 && (!a.IsLine() || a.Quantity <= 0 || a.Amount < 0) {
			t.Fatalf("accepted %+v from %q: neither a positive amount nor a line with a positive quantity", a, raw)
		}
		// What was accepted must round-trip through its canonical form.
		b, err := tool.Normalize(tool.IssueRefund, tool.Canonical(tool.IssueRefund, a))
		if err != nil || b != a {
			t.Fatalf("canonical form of %q does not normalize back: %+v %v", raw, b, err)
		}
	})
}
