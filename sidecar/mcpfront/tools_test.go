package mcpfront_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/cmd/devstack"
)

// Every tool of both fronts, as an MCP client lists it, has an input schema
// that Anthropic's API accepts: a strict object with no oneOf, anyOf or
// allOf at its top level (such a tool fails every request that lists it,
// not only its own calls). GET /v1/tools, which the catalog comes from,
// holds to the same.
func TestMCPToolSchemasHaveNoTopLevelCombinator(t *testing.T) {
	st := start(t, devstack.Options{})
	check := func(t *testing.T, name string, schema map[string]any) {
		t.Helper()
		for _, k := range []string{"oneOf", "anyOf", "allOf"} {
			if _, ok := schema[k]; ok {
				t.Errorf("%s: input schema has %s at its top level: %v", name, k, schema)
			}
		}
		if schema["type"] != "object" || schema["additionalProperties"] != false {
			t.Errorf("%s: input schema is not a strict object: %v", name, schema)
		}
	}
	for who, want := range map[string]int{"rep-ana": 5, "lead-dee": 4} {
		t.Run(who, func(t *testing.T) {
			tools := listTools(t, connect(t, st, who, nil))
			if len(tools) != want {
				t.Fatalf("%d tools listed, want %d", len(tools), want)
			}
			for _, tl := range tools {
				schema, _ := tl.InputSchema.(map[string]any)
				check(t, tl.Name, schema)
			}
		})
	}
	t.Run("GET /v1/tools", func(t *testing.T) {
		res, err := bearerClient(t, st, "rep-ana", nil).Get(st.Endpoints.Sidecar + "/v1/tools")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var body struct {
			Tools []struct {
				Name        string         `json:"name"`
				InputSchema map[string]any `json:"input_schema"`
			} `json:"tools"`
		}
		jsonDecode(t, res, &body)
		if res.StatusCode != http.StatusOK || len(body.Tools) != 3 {
			t.Fatalf("status %d, %d tools", res.StatusCode, len(body.Tools))
		}
		for _, tl := range body.Tools {
			check(t, tl.Name, tl.InputSchema)
		}
	})
}

// Every tool of both fronts carries its annotations over a real session:
// what only reads is read-only, a refund and a reship are destructive and
// idempotent within a workflow, countersign_wait and the decisions are not
// read-only, and none is open-world.
func TestMCPToolAnnotations(t *testing.T) {
	st := start(t, devstack.Options{})
	type hints struct{ readOnly, destructive, idempotent bool }
	want := map[string]hints{
		"lookup_order":       {readOnly: true, idempotent: true},
		"issue_refund":       {destructive: true, idempotent: true},
		"reship_order":       {destructive: true, idempotent: true},
		"countersign_status": {readOnly: true, idempotent: true},
		"countersign_wait":   {destructive: true, idempotent: true},
		"approvals_pending":  {readOnly: true, idempotent: true},
		"approval_get":       {readOnly: true, idempotent: true},
		"approval_approve":   {idempotent: true},
		"approval_reject":    {idempotent: true},
	}
	var seen []string
	for _, who := range []string{"rep-ana", "lead-dee"} {
		for _, tl := range listTools(t, connect(t, st, who, nil)) {
			seen = append(seen, tl.Name)
			a := tl.Annotations
			if a == nil {
				t.Errorf("%s: no annotations", tl.Name)
				continue
			}
			w, ok := want[tl.Name]
			if !ok {
				t.Errorf("%s: a tool this test does not know", tl.Name)
				continue
			}
			got := hints{readOnly: a.ReadOnlyHint, destructive: a.DestructiveHint != nil && *a.DestructiveHint, idempotent: a.IdempotentHint}
			if got != w || a.DestructiveHint == nil || a.OpenWorldHint == nil || *a.OpenWorldHint || a.Title == "" || tl.Title != a.Title {
				t.Errorf("%s: annotations %+v (destructive %v, open world %v), title %q; want %+v, closed world, a title",
					tl.Name, *a, deref(a.DestructiveHint), deref(a.OpenWorldHint), tl.Title, w)
			}
		}
	}
	slices.Sort(seen)
	if len(seen) != len(want) {
		t.Errorf("tools listed %v, want the %d of the table", seen, len(want))
	}
}

func deref(b *bool) any {
	if b == nil {
		return nil
	}
	return *b
}

// listTools lists a session's tools as the client received them: the raw
// JSON of tools/list decoded, so a field the SDK would drop is still seen.
func listTools(t *testing.T, cs *mcp.ClientSession) []*mcp.Tool {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	// Round-trip through JSON: the schema a client holds is what the wire
	// carried.
	b, err := json.Marshal(res.Tools)
	if err != nil {
		t.Fatal(err)
	}
	var tools []*mcp.Tool
	if err := json.Unmarshal(b, &tools); err != nil {
		t.Fatal(err)
	}
	return tools
}
