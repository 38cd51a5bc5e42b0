package mcpfront_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/sidecar/client"
	"github.com/countersign/countersign/sidecar/mcpfront"
)

// A step's reason and a lead's comment reach the model in words: a denied
// call's text says the fact that decided and what can be done next, and
// countersign_wait's text carries the comment of the lead who rejected the
// refund. The sidecar here is a stand-in over a real socket that answers
// as the API does once it sends reason and approval_comment.
func TestMCPTextCarriesReasonAndComment(t *testing.T) {
	const workflow = `{"id":"W-1","ticket":"T-1","user":"rep-ana","status":"%s","policy_revision":"p1",` +
		`"created":"2026-01-02T03:04:05Z","updated":"2026-01-02T03:04:05Z"%s}`
	const rejected = `,"steps":[{"workflow":"W-1","n":2,"tool":"issue_refund","args":{"order":"O-1002","amount":12000},` +
		`"status":"denied","decision":"REQUIRE_APPROVAL","rule":"R7-refund-needs-approval",` +
		`"approval":{"id":"A-1","status":"rejected","summary":"refund $120.00 on O-1002","expires":"2026-01-02T03:19:05Z"},` +
		`"reason":{"text":"the lead rejected the refund","next":"tell the customer; offer a smaller amount"},` +
		`"approval_comment":"customer already got a voucher"}]`
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/workflows", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, workflow, "running", "")
	})
	mux.HandleFunc("POST /v1/workflows/W-1/steps", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`{"workflow":"W-1","n":1,"tool":"issue_refund","args":{"order":"O-1003","amount":2000},"status":"denied",` +
			`"decision":"DENY","rule":"R2-order-outside-region","reason":{"text":"order O-1003 is in region US; the rep's region is EU",` +
			`"facts":{"order_region":"US","rep_region":"EU"},"next":"nothing you can do: a rep of region US must make this refund"},` +
			`"error":{"code":"policy_denied","message":"denied by policy rule R2-order-outside-region","rule":"R2-order-outside-region"}}`))
	})
	for _, route := range []string{"GET /v1/workflows/W-1", "POST /v1/workflows/W-1/resume"} {
		mux.HandleFunc(route, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, workflow, "failed", rejected)
		})
	}
	sidecar := httptest.NewServer(mux)
	defer sidecar.Close()

	c, err := client.New(sidecar.URL, "a-token", client.Strict())
	if err != nil {
		t.Fatal(err)
	}
	srv := mcpfront.NewServer(mcpfront.Config{Client: func(*mcp.CallToolRequest) (*client.Client, error) { return c, nil },
		Catalog:  []client.Tool{{Name: "issue_refund", Description: "refund", InputSchema: jsonRaw(`{"type":"object","properties":{},"additionalProperties":false}`)}},
		Workflow: "W-1", Ticket: "T-1"})
	ct, stt := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := srv.Connect(ctx, stt, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cs.Close(); ss.Wait() }()

	res := call(t, cs, "issue_refund", map[string]any{})
	var st client.Step
	structured(t, res, &st)
	if st.Reason == nil || st.Reason.Facts["order_region"] != "US" {
		t.Errorf("the step's reason %+v, want it as the sidecar sent it", st.Reason)
	}
	for _, want := range []string{"Why: order O-1003 is in region US; the rep's region is EU.", "Next: nothing you can do: a rep of region US must make this refund."} {
		if !strings.Contains(resultText(res), want) {
			t.Errorf("denied text %q lacks %q", resultText(res), want)
		}
	}
	res = call(t, cs, "countersign_wait", map[string]any{"timeout_seconds": 1})
	var w client.Workflow
	structured(t, res, &w)
	if len(w.Steps) != 1 || w.Steps[0].ApprovalComment != "customer already got a voucher" {
		t.Errorf("the workflow's step %+v, want its approval_comment", w.Steps)
	}
	for _, want := range []string{`The lead's comment: "customer already got a voucher".`, "Why: the lead rejected the refund.", "Next: tell the customer; offer a smaller amount."} {
		if !strings.Contains(resultText(res), want) {
			t.Errorf("countersign_wait text %q lacks %q", resultText(res), want)
		}
	}
}
