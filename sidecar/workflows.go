package sidecar

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/executor/store"
)

// What an integrator builds on: GET /v1/workflows pages through the
// workflows a caller may read, and GET /v1/workflows/{id}?wait= answers
// when the workflow changes instead of being polled.

// The page sizes of GET /v1/workflows.
const (
	defaultWorkflowLimit = 50
	maxWorkflowLimit     = 500
)

// maxWait bounds GET /v1/workflows/{id}?wait=.
const maxWait = 60 * time.Second

// workflowsAnswer is one page of workflows, oldest first; [] when the
// page is empty. NextCursor is the cursor of the next page, "" when
// nothing follows.
type workflowsAnswer struct {
	Workflows  []workflowItem `json:"workflows"`
	NextCursor string         `json:"next_cursor"`
}

// workflowItem is a workflow as GET /v1/workflows/{id} shows it, with how
// many steps it has in place of the steps, which a list does not read.
type workflowItem struct {
	ID             string               `json:"id"`
	Ticket         string               `json:"ticket"`
	User           string               `json:"user"`
	Status         store.WorkflowStatus `json:"status"`
	PolicyRevision string               `json:"policy_revision"`
	Created        time.Time            `json:"created"`
	Updated        time.Time            `json:"updated"`
	AgentVersion   string               `json:"agent_version,omitempty"`
	Bounds         *boundsView          `json:"bounds,omitempty"`
	StepCount      int                  `json:"step_count"`
}

func newWorkflowsAnswer(p store.WorkflowPage) workflowsAnswer {
	out := workflowsAnswer{Workflows: make([]workflowItem, 0, len(p.Workflows))}
	for _, w := range p.Workflows {
		v := newWorkflowView(w)
		out.Workflows = append(out.Workflows, workflowItem{ID: v.ID, Ticket: v.Ticket, User: v.User, Status: v.Status,
			PolicyRevision: v.PolicyRevision, Created: v.Created, Updated: v.Updated, AgentVersion: v.AgentVersion,
			Bounds: v.Bounds, StepCount: w.Steps})
	}
	if p.Next != 0 {
		out.NextCursor = newCursor(p.Next)
	}
	return out
}

// listWorkflows answers a page of the workflows the caller may read: a
// rep's own, all of them for a lead or an operator (who may read any one
// of them already).
func (s *Server) listWorkflows(c echo.Context) error {
	f, limit, err := workflowQuery(c)
	if err != nil {
		return err
	}
	page, err := s.opts.Engine.Workflows(c.Request().Context(), person(c), f, limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newWorkflowsAnswer(page))
}

// workflowQuery reads status, limit and cursor. One that does not parse is
// a 400 invalid_query naming it, as for every list.
func workflowQuery(c echo.Context) (f store.WorkflowFilter, limit int, err error) {
	switch f.Status = store.WorkflowStatus(c.QueryParam("status")); f.Status {
	case "", store.WorkflowRunning, store.WorkflowWaitingApproval, store.WorkflowPaused,
		store.WorkflowNeedsReconciliation, store.WorkflowDone, store.WorkflowFailed:
	default:
		return f, 0, newError(http.StatusBadRequest, "invalid_query",
			"status: %q is not a workflow status; use one of running, waiting_approval, paused, needs_reconciliation, done, failed, or leave it out for all", clip(string(f.Status)))
	}
	limit = defaultWorkflowLimit
	if v := c.QueryParam("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > maxWorkflowLimit {
			return f, 0, newError(http.StatusBadRequest, "invalid_query",
				"limit: %q is not a whole number from 1 to %d (default %d)", clip(v), maxWorkflowLimit, defaultWorkflowLimit)
		}
	}
	if v := c.QueryParam("cursor"); v != "" {
		if f.After, err = parseCursor(v); err != nil {
			return f, 0, newError(http.StatusBadRequest, "invalid_query",
				"cursor: %q is not a cursor this endpoint answered; pass next_cursor as it came, or leave cursor out to start at the beginning", clip(v))
		}
	}
	return f, limit, nil
}

// awaitWorkflow answers GET /v1/workflows/{id}?wait=D: the workflow once
// one of its steps or their approvals changes status, or as it stands
// when D has passed or the server begins to shut down. The request's own
// goroutine does the waiting.
func (s *Server) awaitWorkflow(c echo.Context) error {
	wait, err := waitQuery(c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), wait)
	defer cancel()
	defer context.AfterFunc(s.draining, cancel)()
	snap, _, err := s.opts.Engine.Await(ctx, person(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, snapshotView(snap))
}

// waitQuery reads ?wait=, a duration from 0 to maxWait written as Go
// writes one ("30s", "1m", "1500ms").
func waitQuery(c echo.Context) (time.Duration, error) {
	v := c.QueryParam("wait")
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > maxWait {
		return 0, newError(http.StatusBadRequest, "invalid_query",
			"wait: %q is not a duration from 0s to %ds; write it like 30s", clip(v), int(maxWait/time.Second))
	}
	return d, nil
}
