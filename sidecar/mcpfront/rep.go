package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
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

// The arguments that name a call's workflow, on every tool of a rep's
// session, and the agent's reason for a call, on the catalog's; the front
// takes them out of a catalog tool's arguments.
const (
	workflowArg = "workflow"
	ticketArg   = "ticket"
	reasonArg   = "reason"
)

// targetProperties are the schema of workflowArg and ticketArg.
const targetProperties = `"workflow":{"type":"string","pattern":"^[A-Za-z0-9._-]{1,64}$",` +
	`"description":"id of the workflow to work in (a step's answer gives it); default: this session's"},` +
	`"ticket":{"type":"string","pattern":"^[A-Za-z0-9._-]{1,64}$",` +
	`"description":"the ticket the work is for: a call opens a workflow for a ticket new to this session; with workflow, that workflow's ticket"}`

// reasonProperty is the schema of reasonArg, on the catalog's tools.
const reasonProperty = `"reason":{"type":"string","maxLength":500,` +
	`"description":"why you make this call, in one line: shown to the lead who approves it; never used by policy"}`

var (
	statusSchema = json.RawMessage(`{"type":"object","properties":{` + targetProperties + `},"additionalProperties":false}`)
	waitSchema   = json.RawMessage(`{"type":"object","properties":{"timeout_seconds":{"type":"integer","minimum":1,"maximum":60,` +
		`"description":"how long to wait at most, in seconds (default 60)"},` + targetProperties + `},"additionalProperties":false}`)
)

// rep is a rep's session: the catalog, governed, in the workflows its
// calls name.
type rep struct {
	cfg Config
	// own is the ticket of the session's own workflow when neither the
	// calls nor the defaults name one, where the transport has no session
	// id (stdio).
	own string

	mu     sync.Mutex
	opened []opened // the workflows this session opened or found, oldest first
}

// opened is a workflow this session opened (or found again) by its ticket.
type opened struct{ id, ticket string }

// target names a workflow: an id, a ticket, or both; reason is the
// agent's own reason for the call, which travels with it.
type target struct{ workflow, ticket, reason string }

func (t target) named() bool { return t.workflow != "" || t.ticket != "" }

func addRepTools(s *mcp.Server, r *rep) map[string]mcp.ToolHandler {
	r.own = "mcp-" + ulid.Make().String()
	tools := map[string]mcp.ToolHandler{}
	for _, t := range r.cfg.Catalog {
		schema, err := withTarget(t.InputSchema)
		handler := r.governed(t.Name)
		if err != nil {
			// A schema the front cannot extend is served as given, and
			// its calls as given go to the session's default workflow.
			schema, handler = t.InputSchema, r.governedAsGiven(t.Name)
		}
		add(s, tools, t.Name, t.Description, schema, catalogHints(t.Annotations), handler)
	}
	add(s, tools, statusTool, "Where a countersign workflow stands (default: this session's): each step with its status, "+
		"decision, rule, approval and result.", statusSchema, hints("Where the workflow stands", true, false, true), r.status)
	add(s, tools, waitTool, "Wait (up to 60 s) until the workflow's pending approvals are answered, then resume it and say "+
		"what ran. Call it after a call answered waiting_approval, held or unknown, with the same workflow.", waitSchema,
		// It resumes the workflow: an approved step runs then.
		hints("Wait for approval and resume", false, true, true), r.wait)
	return tools
}

// catalogHints are a catalog tool's annotations as MCP says them; nil (the
// protocol's cautious defaults) from a sidecar that gives none.
func catalogHints(a *client.ToolAnnotations) *mcp.ToolAnnotations {
	if a == nil {
		return nil
	}
	return &mcp.ToolAnnotations{Title: a.Title, ReadOnlyHint: a.ReadOnly, DestructiveHint: &a.Destructive,
		IdempotentHint: a.Idempotent, OpenWorldHint: &a.OpenWorld}
}

// withTarget is a catalog tool's input schema with workflowArg,
// ticketArg and reasonArg added to its properties, strict as it was. A schema that is
// not an object with properties, or that has either name already, is an
// error.
func withTarget(schema json.RawMessage) (json.RawMessage, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(schema, &top); err != nil {
		return nil, err
	}
	var props map[string]json.RawMessage
	if err := json.Unmarshal(top["properties"], &props); err != nil || props == nil {
		return nil, fmt.Errorf("the schema has no properties object")
	}
	var own map[string]json.RawMessage
	if err := json.Unmarshal([]byte("{"+targetProperties+","+reasonProperty+"}"), &own); err != nil {
		return nil, err
	}
	for name, p := range own {
		if _, ok := props[name]; ok {
			return nil, fmt.Errorf("the tool has an argument %q of its own", name)
		}
		props[name] = p
	}
	var err error
	if top["properties"], err = json.Marshal(props); err != nil {
		return nil, err
	}
	return json.Marshal(top)
}

// governed proposes a call of a catalog tool as a step of the workflow
// it names (see target), with its arguments as they came but for
// workflowArg, ticketArg and reasonArg.
func (r *rep) governed(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args, named, err := takeTarget(req.Params.Arguments)
		if err != nil {
			return errorResult(err), nil
		}
		return r.propose(ctx, req, name, args, named), nil
	}
}

// governedAsGiven proposes a call with its arguments as they came, in the
// session's default workflow.
func (r *rep) governedAsGiven(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return r.propose(ctx, req, name, req.Params.Arguments, target{}), nil
	}
}

func (r *rep) propose(ctx context.Context, req *mcp.CallToolRequest, name string, raw json.RawMessage, named target) *mcp.CallToolResult {
	c, res := clientFor(r.cfg, req)
	if res != nil {
		return res
	}
	var args any = raw
	if len(raw) == 0 {
		args = nil // no arguments: "args": null, as /v1 would get it
	}
	return stepResult(r.send(ctx, c, r.target(req, named), client.NewStep{Tool: name, Args: args, Reason: named.reason}))
}

// takeTarget takes workflowArg, ticketArg and reasonArg out of a catalog tool's
// arguments and returns the rest: as they came, byte for byte, when
// neither is there. An empty string names nothing. Arguments that are not
// one clean object are returned as they came, for /v1 to answer.
func takeTarget(raw json.RawMessage) (json.RawMessage, target, error) {
	m, err := strictjson.Object(raw)
	if err != nil {
		return raw, target{}, nil
	}
	var t target
	took := false
	for _, f := range []struct {
		name string
		to   *string
	}{{workflowArg, &t.workflow}, {ticketArg, &t.ticket}, {reasonArg, &t.reason}} {
		v, ok, err := m.Take(f.name)
		if err != nil {
			return nil, target{}, argsError(err)
		}
		if !ok {
			continue
		}
		took = true
		if err := strictjson.Decode(v, f.to); err != nil {
			return nil, target{}, argsError(fmt.Errorf("%s: %w", f.name, err))
		}
	}
	if !took {
		return raw, target{}, nil
	}
	rest, err := json.Marshal(m)
	return rest, t, err
}

// status answers the workflow with its steps.
func (r *rep) status(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Workflow string `json:"workflow"`
		Ticket   string `json:"ticket"`
	}
	if err := decodeArgs(req.Params.Arguments, &in); err != nil {
		return errorResult(err), nil
	}
	c, res := clientFor(r.cfg, req)
	if res != nil {
		return res, nil
	}
	wf, err := r.find(ctx, c, r.target(req, target{workflow: in.Workflow, ticket: in.Ticket}))
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
		TimeoutSeconds *int   `json:"timeout_seconds"`
		Workflow       string `json:"workflow"`
		Ticket         string `json:"ticket"`
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
	wf, err := r.find(ctx, c, r.target(req, target{workflow: in.Workflow, ticket: in.Ticket}))
	if err != nil {
		return errorResult(err), nil
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

// target is the workflow a call works in: the one its arguments name,
// else the one the session's defaults name (headers, flags), else the
// session's own, ticket mcp-<session id>.
func (r *rep) target(req *mcp.CallToolRequest, named target) target {
	if named.named() {
		return named
	}
	if d := (target{workflow: r.cfg.Workflow, ticket: r.cfg.Ticket}); d.named() {
		return d
	}
	if req.Session != nil && req.Session.ID() != "" {
		return target{ticket: "mcp-" + req.Session.ID()}
	}
	return target{ticket: r.own}
}

// send proposes ns in the workflow t names, in one request that also
// opens it when t has a ticket (POST /v1/workflows/{id}/steps with the
// ticket, which opens the workflow in the transaction that admits the
// step):
//
//	workflow alone       that workflow, never opened (/v1 answers
//	                     not_found for one that does not exist)
//	workflow and ticket  opened by the call, or found again
//	ticket alone         the last one this session worked in for the
//	                     ticket, else a new id, opened by the call
//
// A call for a ticket the session has no workflow for yet holds the others
// until it is answered, so that a session opens one workflow for a ticket.
func (r *rep) send(ctx context.Context, c *client.Client, t target, ns client.NewStep) (client.Step, error) {
	if t.ticket == "" {
		return c.Propose(ctx, t.workflow, ns)
	}
	ns.Ticket = t.ticket
	r.mu.Lock()
	if id, ok := r.lookup(t); ok {
		r.mu.Unlock()
		return c.Propose(ctx, id, ns)
	}
	defer r.mu.Unlock()
	id := t.workflow
	if id == "" {
		id = "W-" + ulid.Make().String()
	}
	st, err := c.Propose(ctx, id, ns)
	if opens(st, err) {
		r.opened = append(r.opened, opened{id: id, ticket: t.ticket})
	}
	return st, err
}

// opens reports whether an answer to a proposal that opens its workflow
// may have opened it: a step (done, denied, waiting ...), or a failure of
// the sidecar's own. A refusal of the request (a taken id, arguments that
// break the schema) opened nothing.
func opens(st client.Step, err error) bool {
	var ae *client.Error
	return err == nil || st.N > 0 || !errors.As(err, &ae) || ae.Status >= http.StatusInternalServerError
}

// find returns the id of the workflow t names for countersign_status and
// countersign_wait, which never create one: a workflow named by id (with
// its ticket, when given, checked), or the last one this session worked
// in for the ticket; not_found when there is none.
func (r *rep) find(ctx context.Context, c *client.Client, t target) (string, error) {
	r.mu.Lock()
	id, ok := r.lookup(t)
	r.mu.Unlock()
	switch {
	case ok:
		return id, nil
	case t.workflow == "":
		return "", &client.Error{Status: http.StatusNotFound, Code: "not_found", Message: fmt.Sprintf("this session has "+
			"worked in no workflow for ticket %q yet: a call of a tool opens it; or name an existing workflow with %q", t.ticket, workflowArg)}
	case t.ticket == "":
		return t.workflow, nil
	}
	w, err := c.Workflow(ctx, t.workflow)
	if err != nil {
		return "", err
	}
	if w.Ticket != t.ticket {
		return "", &client.Error{Status: http.StatusConflict, Code: "workflow_exists", Message: fmt.Sprintf("workflow %q "+
			"was opened for another ticket than %q; name it by %q alone, or name the ticket's own workflow", w.ID, t.ticket, workflowArg)}
	}
	return w.ID, nil
}

// lookup finds the last workflow the session worked in that t names by
// its ticket (and id, when t has one). The caller holds r.mu.
func (r *rep) lookup(t target) (string, bool) {
	for i := len(r.opened) - 1; i >= 0; i-- {
		if o := r.opened[i]; o.ticket == t.ticket && (t.workflow == "" || o.id == t.workflow) {
			return o.id, true
		}
	}
	return "", false
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
