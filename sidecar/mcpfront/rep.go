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

	"github.com/countersign/countersign/executor/strictjson"
	"github.com/countersign/countersign/sidecar/client"
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
		c, wf, res := r.open(ctx, req)
		if res != nil {
			return res, nil
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
	c, wf, res := r.open(ctx, req)
	if res != nil {
		return res, nil
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
	c, wf, res := r.open(ctx, req)
	if res != nil {
		return res, nil
	}
	w, pending, err := r.await(ctx, c, wf, limit)
	if err != nil {
		return errorResult(err), nil
	}
	if len(pending) > 0 {
		return &mcp.CallToolResult{StructuredContent: w, Content: text("still waiting after %v for approval %v; nothing "+
			"more has run. Call countersign_wait again to keep waiting.\n%s", limit, pending, workflowText(w))}, nil
	}
	if w, err = c.Resume(ctx, wf); err != nil {
		return errorResult(err), nil
	}
	return &mcp.CallToolResult{StructuredContent: w, Content: text("resumed: no approval is pending any more. %s", workflowText(w))}, nil
}

// await reads the workflow until none of its approvals is pending or
// limit has passed, and answers it with the approvals still pending.
// Between reads it waits for a change since the version it last read
// (GET ?wait=&since=), for at most PollInterval, so an answer given
// between a read and the next wait is seen at once. A sidecar that
// answers a wait at once (one before ?wait=) is read at most every
// minGap.
func (r *rep) await(ctx context.Context, c *client.Client, wf string, limit time.Duration) (client.Workflow, []string, error) {
	end := time.Now().Add(limit)
	w, version, err := c.WaitWorkflow(ctx, wf, "", 0)
	var began time.Time // of the last wait
	for {
		if err != nil {
			return w, nil, err
		}
		pending, expiry := r.pending(w)
		left := time.Until(end)
		if len(pending) == 0 || left <= 0 {
			return w, pending, nil
		}
		if early := minGap - time.Since(began); early > 0 {
			select {
			case <-ctx.Done():
				return w, pending, fmt.Errorf("countersign_wait: %w", ctx.Err())
			case <-time.After(early):
			}
		}
		began = time.Now()
		w, version, err = c.WaitWorkflow(ctx, wf, version, min(left, r.cfg.PollInterval, expiry))
	}
}

// pending lists the approvals the workflow's steps wait on that a lead may
// still answer (pending and not past their expiry: an expired one is asked
// again at the resume), and how long until the first of them expires.
func (r *rep) pending(w client.Workflow) (ids []string, expiry time.Duration) {
	now := r.cfg.Clock.Now()
	expiry = maxWait
	for _, st := range w.Steps {
		if a := st.Approval; st.Status == client.StepWaitingApproval && a != nil && a.Status == client.ApprovalPending && now.Before(a.Expires) {
			ids = append(ids, a.ID)
			expiry = min(expiry, a.Expires.Sub(now))
		}
	}
	return ids, expiry
}

// open returns the caller's client and the session's workflow, opened at
// its first use (created, or found again with the same id and ticket), or
// the error result that says why there is none. Calls wait for each other
// here, so that a session opens one workflow.
func (r *rep) open(ctx context.Context, req *mcp.CallToolRequest) (*client.Client, string, *mcp.CallToolResult) {
	c, res := clientFor(r.cfg, req)
	if res != nil {
		return nil, "", res
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.wf != "" {
		return c, r.wf, nil
	}
	nw := client.NewWorkflow{ID: r.cfg.Workflow, Ticket: r.cfg.Ticket}
	if nw.ID == "" && nw.Ticket == "" {
		nw.Ticket = "mcp-" + sessionID(req)
	}
	w, _, err := c.CreateWorkflow(ctx, nw)
	if err != nil {
		return nil, "", errorResult(fmt.Errorf("opening the session's workflow: %w", err))
	}
	r.wf = w.ID
	return c, r.wf, nil
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
