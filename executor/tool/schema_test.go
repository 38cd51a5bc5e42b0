package tool_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/countersign/countersign/executor/tool"
)

// No input schema of the catalog has oneOf, anyOf or allOf at its top
// level: Anthropic's API refuses such a tool, and with it every request
// that lists it (the MCP front serves these schemas as they are). Each is
// a strict object.
func TestInputSchemasHaveNoTopLevelCombinator(t *testing.T) {
	for _, s := range tool.All() {
		var top map[string]any
		if err := json.Unmarshal(s.InputSchema, &top); err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		for _, k := range []string{"oneOf", "anyOf", "allOf"} {
			if _, ok := top[k]; ok {
				t.Errorf("%s: input_schema has %s at its top level", s.Name, k)
			}
		}
		if top["type"] != "object" || top["additionalProperties"] != false {
			t.Errorf("%s: input_schema is not a strict object: %s", s.Name, s.InputSchema)
		}
	}
}

// issue_refund's schema says what Normalize accepts: an amount, or a line
// with its quantity (an amount beside them allowed), and nothing else; the
// same rule as the oneOf it replaced. Every combination of the fields is
// tried, each with a good value, so only which fields are there decides.
func TestRefundSchemaSaysWhatNormalizeAccepts(t *testing.T) {
	spec, _ := tool.Lookup(tool.IssueRefund)
	served := resolve(t, spec.InputSchema)
	// The schema as it was, with a top-level oneOf.
	former := resolve(t, json.RawMessage(`{"type": "object", "additionalProperties": false, "properties": {`+
		`"order": {"type": "string"}, "amount": {"type": "integer"}, "line": {"type": "string"}, "quantity": {"type": "integer"}}, `+
		`"required": ["order"], "oneOf": [{"required": ["amount"], "not": {"anyOf": [{"required": ["line"]}, {"required": ["quantity"]}]}}, `+
		`{"required": ["line", "quantity"]}]}`))
	good := map[string]any{"order": "O-1001", "amount": 3000, "line": "L1", "quantity": 1}
	fields := []string{"order", "amount", "line", "quantity"}
	accepted := 0
	for set := range 1 << len(fields) {
		args := map[string]any{}
		for i, f := range fields {
			if set&(1<<i) != 0 {
				args[f] = good[f]
			}
		}
		raw, _ := json.Marshal(args)
		t.Run(string(raw), func(t *testing.T) {
			var instance any
			if err := json.Unmarshal(raw, &instance); err != nil {
				t.Fatal(err)
			}
			_, normErr := tool.Normalize(tool.IssueRefund, raw)
			schemaErr, formerErr := served.Validate(instance), former.Validate(instance)
			if (schemaErr == nil) != (normErr == nil) {
				t.Errorf("the schema says %v, Normalize %v", verdict(schemaErr), verdict(normErr))
			}
			if (schemaErr == nil) != (formerErr == nil) {
				t.Errorf("the schema says %v, the former oneOf %v", verdict(schemaErr), verdict(formerErr))
			}
			if normErr == nil {
				accepted++
			}
		})
	}
	// {order, amount}, {order, line, quantity}, {order, amount, line, quantity}
	if accepted != 3 {
		t.Errorf("Normalize accepted %d of the combinations, want 3: the cases prove less than they say", accepted)
	}
}

func resolve(t *testing.T, raw json.RawMessage) *jsonschema.Resolved {
	t.Helper()
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func verdict(err error) string {
	if err == nil {
		return "valid"
	}
	return fmt.Sprintf("invalid (%v)", err)
}
