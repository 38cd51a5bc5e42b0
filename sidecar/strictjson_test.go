package sidecar_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/countersign/countersign/cmd/devstack"
)

// TestAmbiguousBodiesAreMalformed: a body that two JSON readers could read
// differently (a name twice, or a name in another case that encoding/json
// would match to a field) is 400 malformed_json with the API's error body,
// at the top level and inside args, and reaches neither the policy nor a
// system of record.
func TestAmbiguousBodiesAreMalformed(t *testing.T) {
	e := start(t, devstack.Options{})
	e.open(t, "rep-ana", "W-strict")
	const steps = "/v1/workflows/W-strict/steps"
	for _, c := range []struct {
		name, who, method, path, body string
	}{
		{"a workflow with ticket twice", "rep-ana", http.MethodPost, "/v1/workflows", `{"ticket":"T-1","ticket":"T-2","id":"W-two"}`},
		{"a workflow with TICKET for ticket", "rep-ana", http.MethodPost, "/v1/workflows", `{"TICKET":"T-1","id":"W-upper"}`},
		{"a workflow with Id for id", "rep-ana", http.MethodPost, "/v1/workflows", `{"ticket":"T-1","Id":"W-cap"}`},
		{"a step with tool twice", "rep-ana", http.MethodPost, steps, `{"tool":"lookup_order","tool":"issue_refund","args":{"order":"O-1001","amount":3000}}`},
		{"a step with TOOL for tool", "rep-ana", http.MethodPost, steps, `{"TOOL":"lookup_order","args":{"order":"O-1001"}}`},
		{"a step with tool and Tool", "rep-ana", http.MethodPost, steps, `{"tool":"lookup_order","Tool":"issue_refund","args":{"order":"O-1001"}}`},
		{"a step with Args for args", "rep-ana", http.MethodPost, steps, `{"tool":"lookup_order","Args":{"order":"O-1001"}}`},
		{"a step with args twice", "rep-ana", http.MethodPost, steps, `{"tool":"issue_refund","args":{"order":"O-1001","amount":3000},"args":{"order":"O-1001","amount":300000}}`},
		{"args with order twice", "rep-ana", http.MethodPost, steps, `{"tool":"lookup_order","args":{"order":"O-1","order":"O-2"}}`},
		{"args with order and ORDER", "rep-ana", http.MethodPost, steps, `{"tool":"lookup_order","args":{"order":"O-1","ORDER":"O-2"}}`},
		{"args with Order for order", "rep-ana", http.MethodPost, steps, `{"tool":"lookup_order","args":{"Order":"O-1"}}`},
		{"args with amount twice", "rep-ana", http.MethodPost, steps, `{"tool":"issue_refund","args":{"order":"O-1001","amount":3000,"amount":300000}}`},
		{"args with Amount for amount", "rep-ana", http.MethodPost, steps, `{"tool":"issue_refund","args":{"order":"O-1001","Amount":3000}}`},
		{"args with a duplicate deep inside an extra member", "rep-ana", http.MethodPost, steps, `{"tool":"lookup_order","args":{"order":"O-1001","x":[{"a":1,"a":2}]}}`},
		{"an amendment with Args for args", "rep-ana", http.MethodPatch, steps + "/1", `{"Args":{"order":"O-1001","amount":100}}`},
		{"an approval comment twice", "lead-dee", http.MethodPost, "/v1/approvals/AP-999/approve", `{"comment":"ok","comment":"no"}`},
		{"a switch with Enabled for enabled", "ops-ida", http.MethodPut, "/v1/switches/issue_refund", `{"Enabled":false}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{"Authorization": {"Bearer " + e.st.Tokens[c.who]}, "Content-Type": {"application/json"}}
			r := e.send(t, c.method, c.path, h, strings.NewReader(c.body))
			r.want(t, http.StatusBadRequest, "malformed_json")
			if msg := r.errorOf(t).Message; !strings.Contains(msg, "twice") && !strings.Contains(msg, "case") {
				t.Errorf("message %q does not say what is wrong", msg)
			}
		})
	}
	if w := e.getWorkflow(t, "rep-ana", "W-strict"); len(w.Steps) != 0 {
		t.Errorf("ambiguous bodies made steps: %+v", w.Steps)
	}
	for _, id := range []string{"W-two", "W-upper", "W-cap"} {
		e.call(t, http.MethodGet, "/v1/workflows/"+id, "rep-ana", nil).want(t, http.StatusNotFound, "not_found")
	}
	e.wantLedger(t, 0)
	// The same call spelled once, as documented, goes through.
	r, _ := e.propose(t, "rep-ana", "W-strict", "lookup_order", map[string]string{"order": "O-1001"})
	r.want(t, http.StatusOK, "")
}

// TestUnknownAndMistypedFieldsStay422: the strict decoder keeps the
// contract's 422 for well-formed bodies that break the schema.
func TestUnknownAndMistypedFieldsStay422(t *testing.T) {
	e := start(t, devstack.Options{})
	e.open(t, "rep-ana", "W-422")
	const steps = "/v1/workflows/W-422/steps"
	for _, c := range []struct {
		name, body, code string
	}{
		{"an unknown top-level field", `{"tool":"lookup_order","args":{"order":"O-1001"},"approved_by":"lead-dee"}`, "invalid_request"},
		{"a number for the tool", `{"tool":7,"args":{"order":"O-1001"}}`, "invalid_request"},
		{"an unknown field in args", `{"tool":"lookup_order","args":{"order":"O-1001","approved_by":"lead-dee"}}`, "invalid_args"},
		{"a fraction of a cent", `{"tool":"issue_refund","args":{"order":"O-1001","amount":30.5}}`, "invalid_args"},
		{"an amount above 2^53-1", `{"tool":"issue_refund","args":{"order":"O-1001","amount":9007199254740992}}`, "invalid_args"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{"Authorization": {"Bearer " + e.st.Tokens["rep-ana"]}, "Content-Type": {"application/json"}}
			e.send(t, http.MethodPost, steps, h, strings.NewReader(c.body)).want(t, http.StatusUnprocessableEntity, c.code)
		})
	}
}
