package sidecar

import (
	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/executor/store"
)

// The JSON shapes of the answers (sidecar/openapi.json). Field names are
// the contract.

func workflowView(w store.Workflow, steps []map[string]any) map[string]any {
	v := map[string]any{
		"id": w.ID, "ticket": w.Ticket, "user": w.User, "status": w.Status,
		"policy_revision": w.PolicyRevision, "created": w.Created, "updated": w.Updated,
	}
	if steps != nil {
		v["steps"] = steps
	}
	return v
}

func (s *Server) workflowWithSteps(c echo.Context, w store.Workflow, steps []store.Step) map[string]any {
	views := make([]map[string]any, 0, len(steps))
	for _, st := range steps {
		views = append(views, s.stepView(c, st))
	}
	return workflowView(w, views)
}

func (s *Server) stepView(c echo.Context, st store.Step) map[string]any {
	v := map[string]any{
		"workflow": st.Workflow, "n": st.N, "tool": st.Tool, "args": argsView(st),
		"status": st.Status, "decision": st.Decision, "rule": st.Rule,
	}
	if st.Approval != "" {
		if a, err := s.opts.Engine.Approval(c.Request().Context(), st.Approval); err == nil {
			v["approval"] = map[string]any{"id": a.ID, "status": a.Status, "summary": a.Summary, "expires": a.Expires}
		}
	}
	if len(st.Result) > 0 {
		v["result"] = st.Result
	}
	if st.Note != "" {
		v["note"] = st.Note
	}
	if st.DuplicateOf != 0 {
		v["duplicate_of"] = st.DuplicateOf
	}
	return v
}

// argsView shows exactly the fields of the tool's schema.
func argsView(st store.Step) map[string]any {
	args := map[string]any{"order": st.Args.Order}
	if st.Tool == "issue_refund" {
		args["amount"] = st.Args.Amount
	}
	return args
}

func approvalView(a store.Approval) map[string]any {
	v := map[string]any{
		"id": a.ID, "workflow": a.Workflow, "n": a.N, "tool": a.Tool, "args": argsView(store.Step{Tool: a.Tool, Args: a.Args}),
		"summary": a.Summary, "requester": a.Requester, "status": a.Status, "expires": a.Expires,
		"call_hash": a.CallHash, "created": a.Created,
	}
	if a.Approver != "" {
		v["approver"] = a.Approver
	}
	if a.Comment != "" {
		v["comment"] = a.Comment
	}
	if a.Retroactive {
		v["retroactive"] = true
	}
	return v
}
