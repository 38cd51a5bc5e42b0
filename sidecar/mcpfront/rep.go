package mcpfront

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/oklog/ulid/v2"

	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/executor/strictjson"
)

// The front's own tools of a rep's session.
const (
	statusTool = "countersign_status"
	waitTool   = "countersign_wait"
)

var (
	statusSchema = json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)
	waitSchema   = json.RawMessage(`{"type":"object","properties":{"timeout_seconds":{"type":"integer","minimum":1,"maximum":60,` +
		`"description":"how long to wait at most, in seconds (default 60)"}},"additionalProperties":false}`)
)

// rep is a rep's session: the catalog, governed, in one workflow.
type rep struct {
	cfg Config

	mu sync.Mutex
	wf string // the session's workflow once opened
}

func addRepTools(s *mcp.Server, r *rep) map[string]mcp.ToolHandler {
	tools := map[string]mcp.ToolHandler{}
	for _, t := range r.cfg.Catalog {
		add(s, tools, t.Name, t.Description, t.InputSchema, r.governed(t.Name))
	}
	add(s, tools, statusTool, "Where this session's countersign workflow stands: each step with its status, decision, rule, "+
		"approval and result.", statusSchema, r.status)
	add(s, tools, waitTool, "Wait (up to 60 s) until the workflow's pending approvals are answered, then resume it and say "+
		"what ran. Call it after a call answered waiting_approval, held or unknown.", waitSchema, r.wait)
	return tools
}

// governed proposes a call of a catalog tool as a step of the session's
// workflow, with the arguments as they came.
func (r *rep) governed(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		c, res := clientFor(r.cfg, req)
		if res != nil {
			return res, nil
		}
		wf, err := r.workflow(ctx, c, req)
		if err != nil {
			return errorResult(err), nil
		}
		var args any = req.Params.Arguments
		if len(req.Params.Arguments) == 0 {
			args = nil // no arguments: "args": null, as /v1 would get it
		}
		return stepResult(c.ProposeStep(ctx, wf, name, args)), nil
	}
}

// status answers the workflow with its steps.
func (r *rep) status(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if err := decodeArgs(req.Params.Arguments, &struct{}{}); err != nil {
		return errorResult(err), nil
	}
	c, res := clientFor(r.cfg, req)
	if res != nil {
		return res, nil
	}
	wf, err := r.workflow(ctx, c, req)
	if err != nil {
		return errorResult(err), nil
	}
	w, err := c.Workflow(ctx, wf)
	if err != nil {
		return errorResult(err), nil
	}
	return &mcp.CallToolResult{Content: text("%s", workflowText(w)), StructuredContent: w}, nil
}

// wait blocks until no step waits on a pending approval, then resumes the
// workflow and answers it.
func (r *rep) wait(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		TimeoutSeconds *int `json:"timeout_seconds"`
	}
	if err := decodeArgs(req.Params.Arguments, &in); err != nil {
		return errorResult(err), nil
	}
	limit := maxWait
	if in.TimeoutSeconds != nil {
		if *in.TimeoutSeconds < 1 || *in.TimeoutSeconds > int(maxWait/time.Second) {
			return errorResult(&client.Error{Status: http.StatusUnprocessableEntity, Code: "invalid_request",
				Message: "timeout_seconds: a whole number of seconds from 1 to 60"}), nil
		}
		limit = time.Duration(*in.TimeoutSeconds) * time.Second
	}
	c, res := clientFor(r.cfg, req)
	if res != nil {
		return res, nil
	}
	wf, err := r.workflow(ctx, c, req)
	if err != nil {
		return errorResult(err), nil
	}
	over := time.NewTimer(limit)
	defer over.Stop()
	tick := time.NewTicker(r.cfg.PollInterval)
	defer tick.Stop()
	for {
		w, err := c.Workflow(ctx, wf)
		if err != nil {
			return errorResult(err), nil
		}
		pending := r.pending(w)
		if len(pending) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return errorResult(fmt.Errorf("countersign_wait: %w", ctx.Err())), nil
		case <-over.C:
			return &mcp.CallToolResult{StructuredContent: w, Content: text("still waiting after %v for approval %v; nothing "+
				"more has run. Call countersign_wait again to keep waiting.\n%s", limit, pending, workflowText(w))}, nil
		case <-tick.C:
		}
	}
	w, err := c.Resume(ctx, wf)
	if err != nil {
		return errorResult(err), nil
	}
	return &mcp.CallToolResult{StructuredContent: w, Content: text("resumed: no approval is pending any more. %s", workflowText(w))}, nil
}

// pending lists the approvals the workflow's steps wait on that a lead may
// still answer: pending and not past their expiry (an expired one is asked
// again at the resume).
func (r *rep) pending(w client.Workflow) []string {
	var ids []string
	now := r.cfg.Clock.Now()
	for _, st := range w.Steps {
		if a := st.Approval; st.Status == client.StepWaitingApproval && a != nil && a.Status == client.ApprovalPending && now.Before(a.Expires) {
			ids = append(ids, a.ID)
		}
	}
	return ids
}

// workflow opens the session's workflow at its first use (create, or get
// the one opened before with the same id and ticket) and answers its id.
// Calls wait for each other here, so a session opens one workflow.
func (r *rep) workflow(ctx context.Context, c *client.Client, req *mcp.CallToolRequest) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.wf != "" {
		return r.wf, nil
	}
	nw := client.NewWorkflow{ID: r.cfg.Workflow, Ticket: r.cfg.Ticket}
	if nw.ID == "" && nw.Ticket == "" {
		nw.Ticket = "mcp-" + sessionID(req)
	}
	w, _, err := c.CreateWorkflow(ctx, nw)
	if err != nil {
		return "", fmt.Errorf("opening the session's workflow: %w", err)
	}
	r.wf = w.ID
	return r.wf, nil
}

// sessionID is the MCP session's id, or a fresh ULID where the transport
// has none (stdio).
func sessionID(req *mcp.CallToolRequest) string {
	if req.Session != nil && req.Session.ID() != "" {
		return req.Session.ID()
	}
	return ulid.Make().String()
}

// decodeArgs decodes a tool's arguments as the API decodes a body:
// strictjson, no unknown fields. No arguments are an empty object.
func decodeArgs(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage(`{}`)
	}
	if err := strictjson.Decode(raw, v); err != nil {
		return argsError(err)
	}
	return nil
}
