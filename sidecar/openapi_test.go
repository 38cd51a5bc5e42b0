package sidecar

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The OpenAPI document and the routes describe the same API: every route is
// documented and every documented operation is served.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	sort.Strings(documented)
	served := New(Options{}).Routes()
	served = slices.Compact(served)
	if !slices.Equal(documented, served) {
		for _, r := range served {
			if !slices.Contains(documented, r) {
				t.Errorf("served but not documented: %s", r)
			}
		}
		for _, r := range documented {
			if !slices.Contains(served, r) {
				t.Errorf("documented but not served: %s", r)
			}
		}
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi version %q", doc.OpenAPI)
	}
}

// Every $ref in the document resolves.
func TestOpenAPIRefsResolve(t *testing.T) {
	var root map[string]any
	if err := json.Unmarshal(openAPI, &root); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				var node any = root
				for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
					m, _ := node.(map[string]any)
					node = m[part]
				}
				if node == nil {
					t.Errorf("unresolved $ref %s", ref)
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(root)
}
