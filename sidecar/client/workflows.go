package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// MaxWait is the longest GET /v1/workflows/{id}?wait= the API holds.
const MaxWait = 60 * time.Second

// Tools lists the catalog: each tool's name, description and JSON input
// schema.
func (c *Client) Tools(ctx context.Context) ([]Tool, error) {
	var out ToolList
	err := c.call(ctx, http.MethodGet, "/v1/tools", nil, nil, &out)
	return out.Tools, err
}

// CreateWorkflow opens a workflow for the token's rep, or answers the
// existing one when the same id and ticket were opened before by the same
// rep (created is then false). Another ticket on an existing id is a 409
// workflow_exists.
func (c *Client) CreateWorkflow(ctx context.Context, nw NewWorkflow) (w Workflow, created bool, err error) {
	a, err := c.do(ctx, http.MethodPost, "/v1/workflows", nil, nw, &w)
	return w, a.status == http.StatusCreated, err
}

// Workflow reads a workflow with its steps.
func (c *Client) Workflow(ctx context.Context, id string) (Workflow, error) {
	var w Workflow
	err := c.call(ctx, http.MethodGet, "/v1/workflows/"+seg(id), nil, nil, &w)
	return w, err
}

// WaitWorkflow answers workflow id once it is no longer at version, the
// version of it the caller last saw, with its new version: GET
// /v1/workflows/{id}?wait=d&since=version. A change made before the call,
// however shortly, is answered at once; otherwise the call waits for the
// next change, for at most d (up to MaxWait), and then answers the
// workflow as it stands with version unchanged. An empty version is one
// the caller has not seen: the call reads the workflow at once. So a loop
// that passes back each answer's version misses no change:
//
//	var version string
//	for {
//		w, version, err = c.WaitWorkflow(ctx, id, version, 30*time.Second)
//		...
//	}
//
// The version is the answer's ETag, opaque: compare it for equality only.
func (c *Client) WaitWorkflow(ctx context.Context, id, version string, d time.Duration) (Workflow, string, error) {
	if d < 0 || d > MaxWait {
		return Workflow{}, version, fmt.Errorf("client: wait %v: from 0s to %v", d, MaxWait)
	}
	var q url.Values // none: a version never seen is read at once
	if version != "" {
		q = url.Values{"wait": {d.Round(time.Millisecond).String()}, "since": {version}}
	}
	var w Workflow
	a, err := c.do(ctx, http.MethodGet, "/v1/workflows/"+seg(id), q, nil, &w)
	if err != nil {
		return w, version, err
	}
	return w, a.header.Get("ETag"), nil
}

// Workflows lists one page of workflows: a rep's own, all of them for a
// lead or an operator. Pass the page's NextCursor as q.Cursor for the next.
func (c *Client) Workflows(ctx context.Context, q WorkflowQuery) (WorkflowPage, error) {
	v := url.Values{}
	if q.Status != "" {
		v.Set("status", string(q.Status))
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	var p WorkflowPage
	err := c.call(ctx, http.MethodGet, "/v1/workflows", v, nil, &p)
	return p, err
}

// ProposeStep proposes a tool call in workflow wf: the step as the API
// answers it. args is marshalled as the call's "args" (a json.RawMessage
// goes as it is, so the API judges it byte for byte). The step's Status
// says what happened; a denied step (403) is answered both as the step,
// with its Error set, and as an *Error with the same code and rule.
func (c *Client) ProposeStep(ctx context.Context, wf, tool string, args any) (Step, error) {
	return c.ProposeStepWithReason(ctx, wf, tool, args, "")
}

// ProposeStepWithReason is ProposeStep with the agent's own reason for the
// call (at most 500 characters, one line), which the step and its approval
// show to a lead; the policy never sees it. "" gives none.
func (c *Client) ProposeStepWithReason(ctx context.Context, wf, tool string, args any, reason string) (Step, error) {
	return c.Propose(ctx, wf, NewStep{Tool: tool, Args: args, Reason: reason})
}

// OpenAndPropose proposes a call in workflow wf and, when no workflow has
// that id yet, opens it for ticket in the same transaction: one request
// where CreateWorkflow and ProposeStep take two. The same request again
// (a retry) is a duplicate call in the workflow it opened; an id opened
// with another ticket, or by another rep, is a 409 workflow_exists.
// Propose with a NewStep also gives the agent version and bounds.
func (c *Client) OpenAndPropose(ctx context.Context, wf, ticket, tool string, args any) (Step, error) {
	return c.Propose(ctx, wf, NewStep{Tool: tool, Args: args, Ticket: ticket})
}

// Propose sends ns to POST /v1/workflows/{wf}/steps, as ProposeStep and
// OpenAndPropose do: the step as the API answers it, a denied step both
// as the step, with its Error set, and as an *Error.
func (c *Client) Propose(ctx context.Context, wf string, ns NewStep) (Step, error) {
	body := ns
	var st Step
	a, err := c.do(ctx, http.MethodPost, "/v1/workflows/"+seg(wf)+"/steps", nil, body, &st)
	var ae *Error
	if errors.As(err, &ae) && ae.Status == http.StatusForbidden {
		// The body of a denied step is the step and its error; any other
		// 403 (a wrong role) is only the error.
		var denied Step
		if c.decode(a.body, &denied) == nil && denied.Status == StepDenied {
			denied.Error = ae
			return denied, err
		}
	}
	return st, err
}

// AmendStep replaces the args of a step that has not started (409
// step_not_amendable once it has).
func (c *Client) AmendStep(ctx context.Context, wf string, n int, args any) (Step, error) {
	body := struct {
		Args any `json:"args"`
	}{args}
	var st Step
	err := c.call(ctx, http.MethodPatch, "/v1/workflows/"+seg(wf)+"/steps/"+strconv.Itoa(n), nil, body, &st)
	return st, err
}

// Resume re-drives every step of wf that is pending, held, waiting for an
// approval, started or unknown, and answers the workflow.
func (c *Client) Resume(ctx context.Context, wf string) (Workflow, error) {
	var w Workflow
	err := c.call(ctx, http.MethodPost, "/v1/workflows/"+seg(wf)+"/resume", nil, nil, &w)
	return w, err
}
