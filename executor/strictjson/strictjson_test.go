package strictjson_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/countersign/countersign/executor/strictjson"
)

// step is shaped like the sidecar's step request: args stay raw for the
// tool's own schema.
type step struct {
	Tool string          `json:"tool"`
	Kind string          `json:"kind,omitempty"`
	Args json.RawMessage `json:"args"`
	Opt  *struct {
		Limit int64 `json:"limit"`
	} `json:"opt,omitempty"`
	Tags []struct {
		Name string `json:"name"`
	} `json:"tags,omitempty"`
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want error // nil: accepted
		path string
	}{
		{"a well-formed body is accepted", `{"tool":"lookup_order","args":{"order":"O-1"}}`, nil, ""},
		{"white space around the value is accepted", " \n{\"tool\":\"x\"}\t ", nil, ""},
		{"a nested struct and an array of structs are accepted", `{"tool":"x","opt":{"limit":5},"tags":[{"name":"a"},{"name":"b"}]}`, nil, ""},
		{"an empty body is malformed", ``, strictjson.ErrMalformed, ""},
		{"broken syntax is malformed", `{"tool":`, strictjson.ErrMalformed, ""},
		{"a second value after the first is malformed", `{"tool":"x"}{}`, strictjson.ErrMalformed, ""},
		{"a stray bracket after the value is malformed", `{"tool":"x"} ]`, strictjson.ErrMalformed, ""},
		{"a duplicate top-level name is malformed", `{"tool":"lookup_order","tool":"issue_refund"}`, strictjson.ErrMalformed, "tool"},
		{"a duplicate spelled with an escape is malformed", `{"tool":"a","t\u006fol":"b"}`, strictjson.ErrMalformed, "tool"},
		{"an upper-case field name is malformed", `{"TOOL":"lookup_order"}`, strictjson.ErrMalformed, "TOOL"},
		{"a capitalised field name is malformed", `{"tool":"x","Args":{}}`, strictjson.ErrMalformed, "Args"},
		{"a field name with a Kelvin sign for k is malformed", `{"tool":"x","\u212aind":"a"}`, strictjson.ErrMalformed, "\u212aind"},
		{"a name folding to a field through a long s is malformed", `{"tool":"x","tag\u017f":[]}`, strictjson.ErrMalformed, "tag\u017f"},
		{"a duplicate inside raw args is malformed", `{"tool":"x","args":{"order":"O-1","order":"O-2"}}`, strictjson.ErrMalformed, "args.order"},
		{"case-variant names inside raw args are malformed", `{"tool":"x","args":{"order":"O-1","ORDER":"O-2"}}`, strictjson.ErrMalformed, "args.ORDER"},
		{"a duplicate deep in an array is malformed", `{"tool":"x","args":{"a":[{"b":1,"b":2}]}}`, strictjson.ErrMalformed, "args.a[0].b"},
		{"a case variant in a nested struct is malformed", `{"tool":"x","opt":{"Limit":1}}`, strictjson.ErrMalformed, "opt.Limit"},
		{"a case variant in an array of structs is malformed", `{"tool":"x","tags":[{"name":"a"},{"NAME":"b"}]}`, strictjson.ErrMalformed, "tags[1].NAME"},
		{"an unknown name is an unknown field", `{"tool":"x","approved_by":"lead-dee"}`, strictjson.ErrUnknownField, "approved_by"},
		{"a malformed name after an unknown one still wins", `{"approved_by":"x","tool":"a","tool":"b"}`, strictjson.ErrMalformed, "tool"},
		{"a duplicate under an unknown name is malformed", `{"tool":"x","extra":{"a":1,"a":2}}`, strictjson.ErrMalformed, "extra.a"},
		{"a number for a string is a wrong type", `{"tool":7}`, strictjson.ErrType, "tool"},
		{"a fraction for an integer is a wrong type", `{"tool":"x","opt":{"limit":30.5}}`, strictjson.ErrType, "opt.limit"},
		{"an exponent for an integer is a wrong type", `{"tool":"x","opt":{"limit":3e3}}`, strictjson.ErrType, "opt.limit"},
		{"an integer beyond int64 is a wrong type", `{"tool":"x","opt":{"limit":99999999999999999999}}`, strictjson.ErrType, "opt.limit"},
		{"a number beyond float64 for an integer is a wrong type", `{"tool":"x","opt":{"limit":1e400}}`, strictjson.ErrType, "opt.limit"},
		{"a number beyond float64 in raw args is accepted here", `{"tool":"x","args":{"amount":1e400}}`, nil, ""},
		{"a number beyond float64 under an unknown name is an unknown field", `{"tool":"x","big":-1e400}`, strictjson.ErrUnknownField, "big"},
		{"an array for the object is a wrong type", `[]`, strictjson.ErrType, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s step
			err := strictjson.Decode([]byte(tc.body), &s)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Decode(%s) = %v, want accepted", tc.body, err)
				}
				return
			}
			var e *strictjson.Error
			if !errors.Is(err, tc.want) || !errors.As(err, &e) || e.Path != tc.path {
				t.Fatalf("Decode(%s) = %v; want %v at %q", tc.body, err, tc.want, tc.path)
			}
		})
	}
}

func TestDecodeKeepsDecodedValues(t *testing.T) {
	var s step
	if err := strictjson.Decode([]byte(`{"tool":"issue_refund","args":{"amount":3000, "order":"O-1"},"opt":{"limit":9007199254740991}}`), &s); err != nil {
		t.Fatal(err)
	}
	if s.Tool != "issue_refund" || string(s.Args) != `{"amount":3000, "order":"O-1"}` || s.Opt.Limit != 1<<53-1 {
		t.Fatalf("decoded %+v (args %s)", s, s.Args)
	}
}

func TestObject(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want error
	}{
		{"an object is split into members", `{"order":"O-1", "amount": 3000 }`, nil},
		{"an array is a wrong type", `[1]`, strictjson.ErrType},
		{"null is a wrong type", `null`, strictjson.ErrType},
		{"an empty body is malformed", ` `, strictjson.ErrMalformed},
		{"trailing data is malformed", `{"order":"O-1"}{}`, strictjson.ErrMalformed},
		{"a duplicate name is malformed", `{"amount":1,"amount":99999}`, strictjson.ErrMalformed},
		{"case-variant names are malformed", `{"order":"O-1","ORDER":"O-2"}`, strictjson.ErrMalformed},
		{"a duplicate in a nested value is malformed", `{"lines":[{"id":1,"id":2}]}`, strictjson.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := strictjson.Object([]byte(tc.body))
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("Object(%s) = %v, want %v", tc.body, err, tc.want)
			}
			if tc.want == nil && (string(m["order"]) != `"O-1"` || string(m["amount"]) != `3000`) {
				t.Fatalf("members %q", m)
			}
		})
	}
}

func TestTake(t *testing.T) {
	for _, tc := range []struct {
		name    string
		body    string
		want    string // the value taken as "order"
		present bool
		err     error
	}{
		{"the exact name is taken", `{"order":"O-1"}`, `"O-1"`, true, nil},
		{"an absent name is reported absent", `{"amount":1}`, ``, false, nil},
		{"a capitalised name is malformed", `{"Order":"O-1"}`, ``, false, strictjson.ErrMalformed},
		{"an upper-case name is malformed", `{"ORDER":"O-1"}`, ``, false, strictjson.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := strictjson.Object([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			v, ok, err := m.Take("order")
			if string(v) != tc.want || ok != tc.present || !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
				t.Fatalf("Take = %s %v %v; want %s %v %v", v, ok, err, tc.want, tc.present, tc.err)
			}
			if _, left := m["order"]; left {
				t.Fatal("a taken member is still there")
			}
		})
	}
}

// TestErrorsDoNotGrowWithTheInput: a refusal repeats at most the start of
// a long name or number.
func TestErrorsDoNotGrowWithTheInput(t *testing.T) {
	long := strings.Repeat("n", 500_000)
	digits := strings.Repeat("9", 900_000)
	for _, body := range []string{
		`{"tool":"x","` + long + `":1}`,
		`{"tool":"x","opt":{"limit":` + digits + `}}`,
		`{"tool":"x","args":{"` + long + `":1,"` + long + `":2}}`,
	} {
		var s step
		err := strictjson.Decode([]byte(body), &s)
		if err == nil {
			t.Fatalf("a %d-byte body was accepted", len(body))
		}
		if n := len(err.Error()); n > 600 {
			t.Errorf("a %d-byte body is refused in %d bytes: %.200s", len(body), n, err)
		}
	}
}
