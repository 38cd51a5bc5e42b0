package sidecar

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/sidecar/client"
)

// What an integrator builds on: GET /v1/workflows pages through the
// workflows a caller may read, and GET /v1/workflows/{id}?wait= answers
// when the workflow changes instead of being polled; its ETag names the
// version the caller saw, so that the next wait answers at once for a
// change the caller has not seen, however recently it was made.

// The page sizes of GET /v1/workflows.
const (
	defaultWorkflowLimit = 50
	maxWorkflowLimit     = 500
)

// maxWait bounds GET /v1/workflows/{id}?wait=.
const maxWait = 60 * time.Second

// newWorkflowsAnswer is one page of workflows, oldest first, each with how
// many steps it has in place of the steps, which a list does not read; []
// when the page is empty. NextCursor is the cursor of the next page, ""
// when nothing follows.
func newWorkflowsAnswer(p store.WorkflowPage) client.WorkflowPage {
	out := client.WorkflowPage{Workflows: make([]client.WorkflowItem, 0, len(p.Workflows))}
	for _, w := range p.Workflows {
		v := newWorkflowView(w)
		out.Workflows = append(out.Workflows, client.WorkflowItem{ID: v.ID, Ticket: v.Ticket, User: v.User, Status: v.Status,
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

// getWorkflow answers GET /v1/workflows/{id}, with its version as a
// strong ETag (workflowAnswer): at once without ?wait=, else once the
// workflow changes (awaitWorkflow). With If-None-Match naming the version
// it answers, the answer is 304 Not Modified without a body, as HTTP has
// it, whether or not the request waited.
func (s *Server) getWorkflow(c echo.Context) error {
	ifNoneMatch := parseVersions(c.Request().Header.Get("If-None-Match"))
	var snap engine.Snapshot
	var err error
	if c.QueryParams().Has("wait") {
		snap, err = s.awaitWorkflow(c, ifNoneMatch.with(c.QueryParam("since")))
	} else {
		snap, err = s.opts.Engine.Snapshot(c.Request().Context(), person(c), c.Param("id"))
	}
	if err != nil {
		return err
	}
	body, version, err := workflowAnswer(snap)
	if err != nil {
		return err
	}
	c.Response().Header().Set("ETag", `"`+version+`"`)
	if ifNoneMatch.has(version) {
		return c.NoContent(http.StatusNotModified)
	}
	return c.JSONBlob(http.StatusOK, body)
}

// awaitWorkflow waits for GET /v1/workflows/{id}?wait=D. Given the
// versions the caller has seen (If-None-Match, ?since=), it answers the
// workflow as soon as it is at none of them: at once when it moved on
// before the request came, so a change made just before a wait is never
// missed. Without them it answers once one of the workflow's steps or
// their approvals changes status after the request came, as it always
// has. Either way it answers the workflow as it stands when D has passed
// or the server begins to shut down. The request's own goroutine does the
// waiting.
func (s *Server) awaitWorkflow(c echo.Context, seen versions) (engine.Snapshot, error) {
	wait, err := waitQuery(c)
	if err != nil {
		return engine.Snapshot{}, err
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), wait)
	defer cancel()
	defer context.AfterFunc(s.draining, cancel)()
	if seen.empty() {
		snap, _, err := s.opts.Engine.Await(ctx, person(c), c.Param("id"))
		return snap, err
	}
	snap, _, err := s.opts.Engine.AwaitUntil(ctx, person(c), c.Param("id"), func(snap engine.Snapshot) bool {
		_, version, err := workflowAnswer(snap)
		return err != nil || !seen.has(version)
	})
	return snap, err
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

// workflowAnswer is the body of GET /v1/workflows/{id} for snap, written
// as c.JSON writes it, and its version: the first 128 bits of the body's
// SHA-256, base64url. The version is a strong validator: the same version
// is the same bytes, and whatever the answer shows changes it (a step
// added, amended or moved on, an approval decided, a result, the
// workflow's status), on every sidecar of a fleet, which all render one
// snapshot alike. What the answer does not show (a step's attempts, its
// token deadline) leaves it as it was, so a waiter is not woken for
// nothing it could see.
func workflowAnswer(snap engine.Snapshot) (body []byte, version string, err error) {
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(snapshotView(snap)); err != nil {
		return nil, "", fmt.Errorf("rendering workflow %s: %w", snap.Workflow.ID, err)
	}
	sum := sha256.Sum256(b.Bytes())
	return b.Bytes(), base64.RawURLEncoding.EncodeToString(sum[:16]), nil
}

// versions are the versions of a workflow a caller says it has seen, by
// If-None-Match (a list of entity tags, or *) and ?since= (one). Tags
// compare without their quotes and weakly (W/ ignored), as If-None-Match
// compares; ?since= takes a tag with or without its quotes.
type versions struct {
	tags []string
	any  bool // *: every version
}

// parseVersions reads an If-None-Match header ("" for none).
func parseVersions(h string) versions {
	var v versions
	for t := range strings.SplitSeq(h, ",") {
		switch t = strings.TrimSpace(t); t {
		case "":
		case "*":
			v.any = true
		default:
			v = v.with(strings.TrimPrefix(t, "W/"))
		}
	}
	return v
}

// with adds tag, a version with or without its quotes ("" adds nothing).
func (v versions) with(tag string) versions {
	if tag = strings.Trim(tag, `"`); tag != "" {
		v.tags = append(slices.Clip(v.tags), tag)
	}
	return v
}

func (v versions) empty() bool { return !v.any && len(v.tags) == 0 }

// has reports whether version is one of v.
func (v versions) has(version string) bool { return v.any || slices.Contains(v.tags, version) }
