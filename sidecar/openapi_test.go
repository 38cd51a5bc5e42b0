package sidecar

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/countersign/countersign/executor/effectiveness"
	"github.com/countersign/countersign/executor/reconcile"
	"github.com/countersign/countersign/sidecar/client"
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
	srv, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	served := srv.Routes()
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
	"getBundleArchive 200":        nil,
	"jwks 200":                    nil,
	"protectedResource 200":       typeOf[resourceMetadata](),
	"protectedResourceMcp 200":    typeOf[resourceMetadata](),
	"openapi 200":                 nil,
	"listTools 200":               typeOf[client.ToolList](),
	"createWorkflow 200":          typeOf[client.Workflow](),
	"createWorkflow 201":          typeOf[client.Workflow](),
	"getWorkflow 200":             typeOf[client.Workflow](),
	"listWorkflows 200":           typeOf[client.WorkflowPage](),
	"proposeStep 200":             typeOf[client.Step](),
	"proposeStep 202":             typeOf[client.Step](),
	"proposeStep 403":             typeOf[client.Step](),
	"amendStep 200":               typeOf[client.Step](),
	"resumeWorkflow 200":          typeOf[client.Workflow](),
	"ratifyStep 200":              typeOf[client.Approval](),
	"reverseStep 200":             typeOf[client.Step](),
	"getStepEvidence 200":         typeOf[client.Evidence](),
	"listApprovals 200":           typeOf[client.ApprovalList](),
	"getApproval 200":             typeOf[client.Approval](),
	"approveApproval 200":         typeOf[client.Approval](),
	"rejectApproval 200":          typeOf[client.Approval](),
	"listSwitches 200":            typeOf[client.SwitchList](),
	"setSwitch 200":               typeOf[client.Switch](),
	"listModes 200":               typeOf[client.ModeList](),
	"setMode 200":                 typeOf[client.Mode](),
	"shadowReport 200":            typeOf[reconcile.ShadowReport](),
	"raiseEpoch 200":              typeOf[client.Epoch](),
	"listBundles 200":             typeOf[[]client.Bundle](),
	"uploadBundle 201":            typeOf[client.Bundle](),
	"uploadBundle 422":            typeOf[client.GateFailedBody](),
	"uploadBundle 200":            typeOf[client.BundlePreview](),
	"uploadBundle 202":            typeOf[client.AwaitingBundle](),
	"approveBundle 201":           typeOf[client.Bundle](),
	"approveBundle 422":           typeOf[client.GateFailedBody](),
	"rollbackBundle 201":          typeOf[client.Bundle](),
	"rollbackBundle 202":          typeOf[client.AwaitingBundle](),
	"rollbackBundle 422":          typeOf[client.GateFailedBody](),
	"getActiveBundle 200":         typeOf[client.Bundle](),
	"getBundle 200":               typeOf[client.Bundle](),
	"getEffectiveness 200":        typeOf[effectiveness.Report](),
	"listDecisions 200":           typeOf[client.DecisionPage](),
	"listAudit 200":               typeOf[client.AuditPage](),
	"verifyAudit 200":             typeOf[client.AuditVerification](),
	"listAuditCheckpoints 200":    typeOf[client.AuditCheckpoints](),
	"auditKeys 200":               typeOf[client.AuditKeys](),
	"runReconciliation 200":       typeOf[client.Reconciliation](),
	"getLatestReconciliation 200": typeOf[client.Reconciliation](),
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
					compareSchema(t, root, key, schema, typeOf[client.ErrorBody]())
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

// responseSchema returns a response's schema: its JSON one, or its one
// schema whatever its media type. A stream's lines (application/x-ndjson)
// beside a JSON answer are TestOpenAPIMatchesStreams's.
func responseSchema(root map[string]any, resp any) map[string]any {
	content, _ := resolve(root, resp)["content"].(map[string]any)
	if media, ok := content["application/json"].(map[string]any); ok {
		s, _ := media["schema"].(map[string]any)
		return s
	}
	for _, media := range content {
		s, _ := media.(map[string]any)["schema"].(map[string]any)
		return s
	}
	return nil
}

// streamed maps each response that streams (application/x-ndjson) to the
// Go type of one of its lines.
var streamed = map[string]reflect.Type{
	"listAudit 200":            typeOf[client.AuditRecord](),
	"listDecisions 200":        typeOf[client.Decision](),
	"listAuditCheckpoints 200": typeOf[client.AuditCheckpoint](),
}

// Every streamed response's line schema lists exactly the JSON fields of
// the type each line is written from.
func TestOpenAPIMatchesStreams(t *testing.T) {
	var root map[string]any
	if err := json.Unmarshal(openAPI, &root); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, ops := range root["paths"].(map[string]any) {
		for _, op := range ops.(map[string]any) {
			op := op.(map[string]any)
			id, _ := op["operationId"].(string)
			for status, resp := range op["responses"].(map[string]any) {
				content, _ := resolve(root, resp)["content"].(map[string]any)
				media, ok := content["application/x-ndjson"].(map[string]any)
				if !ok {
					continue
				}
				key := id + " " + status
				seen[key] = true
				typ, listed := streamed[key]
				schema, _ := media["schema"].(map[string]any)
				if !listed || schema == nil {
					t.Errorf("%s: a stream without a schema, or not in the streamed table", key)
					continue
				}
				compareSchema(t, root, key+" line", schema, typ)
			}
		}
	}
	for key := range streamed {
		if !seen[key] {
			t.Errorf("%s: in the streamed table but streams nothing in openapi.json", key)
		}
	}
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

// properties returns the properties of a schema, merged over allOf and
// oneOf; nil when it names none.
func properties(root map[string]any, schema map[string]any) map[string]any {
	var out map[string]any
	if p, ok := schema["properties"].(map[string]any); ok {
		out = maps.Clone(p)
	}
	// allOf merges; a oneOf of an object and null (a nullable object) is
	// the object's properties.
	all, _ := schema["allOf"].([]any)
	one, _ := schema["oneOf"].([]any)
	for _, part := range slices.Concat(all, one) {
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

// requests maps an operation to the Go type the client sends as its JSON
// body; TestOpenAPIMatchesRequests holds each to the operation's schema.
var requests = map[string]reflect.Type{
	"createWorkflow": typeOf[client.NewWorkflow](),
	"proposeStep":    typeOf[client.NewStep](),
}

// The client's request bodies list exactly the fields the document's
// request schemas do.
func TestOpenAPIMatchesRequests(t *testing.T) {
	var root map[string]any
	if err := json.Unmarshal(openAPI, &root); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, ops := range root["paths"].(map[string]any) {
		for _, op := range ops.(map[string]any) {
			op := op.(map[string]any)
			id, _ := op["operationId"].(string)
			typ, ok := requests[id]
			if !ok {
				continue
			}
			seen[id] = true
			schema := responseSchema(root, op["requestBody"]) // a request body holds its schema as a response does
			if schema == nil {
				t.Errorf("%s: no request body schema", id)
				continue
			}
			compareSchema(t, root, id+" request", schema, typ)
		}
	}
	for id := range requests {
		if !seen[id] {
			t.Errorf("%s: in the requests table but not in openapi.json", id)
		}
	}
}

// notBodies are the struct types of package client that are no body of
// the API, and why.
var notBodies = map[string]string{
	"Client":         "the client itself",
	"Activation":     "which of two answers an activation got (Bundle, AwaitingBundle), never JSON",
	"WorkflowQuery":  "query parameters",
	"ApprovalQuery":  "query parameters",
	"DecisionQuery":  "query parameters",
	"AuditQuery":     "query parameters",
	"AuditExport":    "query parameters",
	"DecisionExport": "query parameters",
	"UploadOptions":  "query parameters",
}

// Every struct type package client declares is a body the document
// describes, reached from the answers or the requests table and so held
// to it field by field, or is named in notBodies: a client type that
// mirrors an answer without being the type the server answers with fails
// here.
func TestOpenAPICoversTheClientsTypes(t *testing.T) {
	declared := map[string]bool{}
	files, err := filepath.Glob("client/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("package client's files: %v, %v", files, err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range gen.Specs {
				if ts, ok := spec.(*ast.TypeSpec); ok && ts.Name.IsExported() {
					if _, isStruct := ts.Type.(*ast.StructType); isStruct {
						declared[ts.Name.Name] = true
					}
				}
			}
		}
	}

	reached := map[string]bool{}
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Array || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || !strings.HasPrefix(typ.PkgPath(), module) {
			return
		}
		if typ.PkgPath() == reflect.TypeFor[client.Client]().PkgPath() {
			if reached[typ.Name()] {
				return
			}
			reached[typ.Name()] = true
		}
		for f := range typ.Fields() {
			walk(f.Type)
		}
	}
	for _, typ := range answers {
		if typ != nil {
			walk(typ)
		}
	}
	for _, typ := range requests {
		walk(typ)
	}
	for _, name := range slices.Sorted(maps.Keys(declared)) {
		why, exempt := notBodies[name]
		switch {
		case exempt && reached[name]:
			t.Errorf("client.%s is in notBodies (%s) but is a body the document describes", name, why)
		case !exempt && !reached[name]:
			t.Errorf("client.%s is no answer or request the OpenAPI test holds to openapi.json: answer with it (the answers table) or name it in notBodies", name)
		}
	}
	for name := range notBodies {
		if !declared[name] {
			t.Errorf("notBodies names client.%s, which package client does not declare", name)
		}
	}
}
