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
	var out struct {
		Tools []Tool `json:"tools"`
	}
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

// WaitWorkflow reads a workflow once a step is added to it or one of its
// steps or their approvals changes status after the call begins, or as it
// stands when d (at most MaxWait) has passed: GET /v1/workflows/{id}?wait=.
// A change just before the call is not one it waits for: read the
// workflow, then wait, and bound each wait.
func (c *Client) WaitWorkflow(ctx context.Context, id string, d time.Duration) (Workflow, error) {
	if d < 0 || d > MaxWait {
		return Workflow{}, fmt.Errorf("client: wait %v: from 0s to %v", d, MaxWait)
	}
	var w Workflow
	q := url.Values{"wait": {d.Round(time.Millisecond).String()}}
	err := c.call(ctx, http.MethodGet, "/v1/workflows/"+seg(id), q, nil, &w)
	return w, err
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
	body := struct {
		Tool string `json:"tool"`
		Args any    `json:"args"`
	}{tool, args}
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
