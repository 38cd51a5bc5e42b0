package sidecar

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/effectiveness"
	"github.com/countersign/countersign/executor/reconcile"
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

// answers maps each documented response ("operationId status") to the Go
// type the handler answers with; nil for a body that is not a Go value
// (metrics text, a key set, this document). An error response not listed
// answers errorBody.
var answers = map[string]reflect.Type{
	"health 200":                  typeOf[healthAnswer](),
	"ready 200":                   typeOf[readyAnswer](),
	"metrics 200":                 nil,
	"jwks 200":                    nil,
	"openapi 200":                 nil,
	"listTools 200":               typeOf[toolsAnswer](),
	"createWorkflow 200":          typeOf[workflowView](),
	"createWorkflow 201":          typeOf[workflowView](),
	"getWorkflow 200":             typeOf[workflowView](),
	"listWorkflows 200":           typeOf[workflowsAnswer](),
	"proposeStep 200":             typeOf[stepView](),
	"proposeStep 202":             typeOf[stepView](),
	"proposeStep 403":             typeOf[deniedStepView](),
	"amendStep 200":               typeOf[stepView](),
	"resumeWorkflow 200":          typeOf[workflowView](),
	"ratifyStep 200":              typeOf[approvalView](),
	"reverseStep 200":             typeOf[stepView](),
	"listApprovals 200":           typeOf[approvalsAnswer](),
	"getApproval 200":             typeOf[approvalView](),
	"approveApproval 200":         typeOf[approvalView](),
	"rejectApproval 200":          typeOf[approvalView](),
	"listSwitches 200":            typeOf[switchesAnswer](),
	"setSwitch 200":               typeOf[switchAnswer](),
	"listModes 200":               typeOf[modesAnswer](),
	"setMode 200":                 typeOf[modeView](),
	"shadowReport 200":            typeOf[reconcile.ShadowReport](),
	"raiseEpoch 200":              typeOf[epochAnswer](),
	"listBundles 200":             typeOf[[]bundleView](),
	"uploadBundle 201":            typeOf[bundleView](),
	"uploadBundle 422":            typeOf[gateFailedBody](),
	"uploadBundle 200":            typeOf[previewAnswer](),
	"uploadBundle 202":            typeOf[awaitingAnswer](),
	"approveBundle 201":           typeOf[bundleView](),
	"approveBundle 422":           typeOf[gateFailedBody](),
	"rollbackBundle 201":          typeOf[bundleView](),
	"rollbackBundle 202":          typeOf[awaitingAnswer](),
	"rollbackBundle 422":          typeOf[gateFailedBody](),
	"getActiveBundle 200":         typeOf[bundleView](),
	"getBundle 200":               typeOf[bundleView](),
	"getEffectiveness 200":        typeOf[effectiveness.Report](),
	"listDecisions 200":           typeOf[decisionsAnswer](),
	"listAudit 200":               typeOf[audit.Page](),
	"verifyAudit 200":             typeOf[audit.Report](),
	"runReconciliation 200":       typeOf[reconcile.Report](),
	"getLatestReconciliation 200": typeOf[reconcile.Report](),
	// The MCP front answers JSON-RPC or event streams; a notification's
	// 202 and the end of a session have no body. Its refusals (403
	// forbidden_origin or another subject's session, 404 an unknown
	// session) are the API's error body.
	"mcpPost 200":   nil,
	"mcpPost 202":   nil,
	"mcpStream 200": nil,
	"mcpEnd 204":    nil,
	// GET / and the lead's page (HTML bodies are not Go values).
	"index 200":             typeOf[indexAnswer](),
	"loginPage 200":         nil,
	"login 4XX":             nil,
	"logout 403":            nil,
	"approvalsPage 200":     nil,
	"approvalsPage 5XX":     nil,
	"beginSignIn 4XX":       nil,
	"finishSignIn 200":      nil,
	"finishSignIn 4XX":      nil,
	"finishSignIn 5XX":      nil,
	"approvalsFragment 200": nil,
	"approvalsScript 200":   nil,
	"approvePage 4XX":       nil,
	"approvePage 5XX":       nil,
	"rejectPage 4XX":        nil,
	"rejectPage 5XX":        nil,
}

func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

// Every operation has an operationId and a schema for each success
// response, and every response schema lists exactly the JSON fields of the
// type that answers it, down through the nested structs of this module: the
// document describes the bodies, not only the paths.
func TestOpenAPIMatchesAnswers(t *testing.T) {
	var root map[string]any
	if err := json.Unmarshal(openAPI, &root); err != nil {
		t.Fatal(err)
	}
	seen, ids := map[string]bool{}, map[string]bool{}
	for path, ops := range root["paths"].(map[string]any) {
		for method, op := range ops.(map[string]any) {
			op := op.(map[string]any)
			id, _ := op["operationId"].(string)
			if id == "" {
				t.Errorf("%s %s: no operationId", strings.ToUpper(method), path)
				continue
			}
			if ids[id] {
				t.Errorf("operationId %s: used twice", id)
			}
			ids[id] = true
			for status, resp := range op["responses"].(map[string]any) {
				key := id + " " + status
				seen[key] = true
				schema := responseSchema(root, resp)
				code, _ := strconv.Atoi(status)
				typ, listed := answers[key]
				switch {
				case schema == nil && code < 300 && !(listed && typ == nil):
					t.Errorf("%s: a success response without a schema", key)
				case schema == nil:
				case !listed && code < 400:
					t.Errorf("%s: no answering type in the table", key)
				case !listed:
					compareSchema(t, root, key, schema, typeOf[errorBody]())
				case typ != nil:
					compareSchema(t, root, key, schema, typ)
				}
			}
		}
	}
	for key := range answers {
		if !seen[key] {
			t.Errorf("%s: in the table but not in openapi.json", key)
		}
	}
}

// responseSchema returns a response's one schema, whatever its media type.
func responseSchema(root map[string]any, resp any) map[string]any {
	content, _ := resolve(root, resp)["content"].(map[string]any)
	for _, media := range content {
		s, _ := media.(map[string]any)["schema"].(map[string]any)
		return s
	}
	return nil
}

// resolve follows a $ref to its node.
func resolve(root map[string]any, v any) map[string]any {
	m, _ := v.(map[string]any)
	for m != nil {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		var node any = root
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			n, _ := node.(map[string]any)
			node = n[part]
		}
		m, _ = node.(map[string]any)
	}
	return m
}

// properties returns the properties of a schema, merged over allOf; nil
// when it names none.
func properties(root map[string]any, schema map[string]any) map[string]any {
	var out map[string]any
	if p, ok := schema["properties"].(map[string]any); ok {
		out = maps.Clone(p)
	}
	all, _ := schema["allOf"].([]any)
	for _, part := range all {
		for k, v := range properties(root, resolve(root, part)) {
			if out == nil {
				out = map[string]any{}
			}
			out[k] = v
		}
	}
	return out
}

const module = "github.com/countersign/countersign/"

var marshaler = reflect.TypeFor[json.Marshaler]()

// compareSchema holds schema against typ: a slice against an array's
// items, a struct of this module field by field. Anything that writes its
// own JSON (times, raw messages, the reconciliation's ordered maps) or is
// not ours is taken as documented.
func compareSchema(t *testing.T, root map[string]any, at string, schema map[string]any, typ reflect.Type) {
	t.Helper()
	schema = resolve(root, schema)
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ.Implements(marshaler) || reflect.PointerTo(typ).Implements(marshaler) {
		return
	}
	switch {
	case typ.Kind() == reflect.Slice:
		items, ok := schema["items"]
		if schema["type"] != "array" || !ok {
			t.Errorf("%s: the answer is a list; the schema is not an array with items", at)
			return
		}
		compareSchema(t, root, at+"[]", resolve(root, items), typ.Elem())
	case typ.Kind() == reflect.Struct && strings.HasPrefix(typ.PkgPath(), module):
		fields := jsonFields(typ)
		props := properties(root, schema)
		for _, name := range slices.Sorted(maps.Keys(fields)) {
			if _, ok := props[name]; !ok {
				t.Errorf("%s: %s (%s) answers %q, which the schema does not list", at, typ, typ.PkgPath(), name)
				continue
			}
			compareSchema(t, root, at+"."+name, resolve(root, props[name]), fields[name])
		}
		for _, name := range slices.Sorted(maps.Keys(props)) {
			if _, ok := fields[name]; !ok {
				t.Errorf("%s: the schema lists %q, which %s never answers", at, name, typ)
			}
		}
	}
}

// jsonFields returns the names encoding/json writes for a struct's fields
// and their types, embedded structs flattened.
func jsonFields(typ reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range typ.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			maps.Copy(out, jsonFields(f.Type))
		case !f.IsExported():
		case name == "":
			out[f.Name] = f.Type
		default:
			out[name] = f.Type
		}
	}
	return out
}
