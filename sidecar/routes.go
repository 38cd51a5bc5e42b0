package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/buildinfo"
	"github.com/countersign/countersign/executor/effectiveness"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/identity"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
	"github.com/countersign/countersign/sidecar/authn"
	"github.com/countersign/countersign/sidecar/client"
)

const principalKey = "principal"

func (s *Server) routes() {
	e := s.echo
	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, healthAnswer{Status: "ok"}) })
	e.GET("/readyz", s.ready)
	e.GET("/metrics", s.metrics(promhttp.HandlerFor(s.opts.Gatherer, promhttp.HandlerOpts{})))
	e.GET("/.well-known/jwks.json", s.jwks)
	e.GET("/.well-known/countersign-audit-keys", s.auditKeys)
	// At the root, as the 401 names it, and with /mcp's path inserted
	// (RFC 9728 §3.1), where MCP clients look when a 401 names none.
	e.GET(protectedResourcePath, s.protectedResource)
	e.GET(protectedResourcePath+"/mcp", s.protectedResource)
	e.GET("/openapi.json", s.openapi)
	// The MCP front (streamable HTTP): a browser page's Origin is checked
	// first, then the bearer is verified as on /v1.
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		e.Add(m, "/mcp", s.serveMCP, s.checkOrigin, s.authenticate)
	}
	e.GET("/", s.index)
	s.leadPage().Mount(e)

	v1 := e.Group("/v1", s.authenticate)
	anyone := func(h echo.HandlerFunc) echo.HandlerFunc { return h }
	rep, lead, op := s.role(engine.RoleRep), s.role(engine.RoleLead, engine.RoleOperator), s.role(engine.RoleOperator)

	v1.GET("/tools", anyone(s.tools))
	v1.POST("/workflows", rep(s.createWorkflow))
	v1.GET("/workflows", anyone(s.listWorkflows))
	v1.GET("/workflows/:id", anyone(s.getWorkflow))
	v1.POST("/workflows/:id/steps", rep(s.proposeStep))
	v1.PATCH("/workflows/:id/steps/:n", rep(s.amendStep))
	v1.POST("/workflows/:id/resume", s.role(engine.RoleRep, engine.RoleOperator)(s.resume))
	// Compensation of an executed refund (incident response): the approver
	// rules decide who may, as for an approval.
	v1.POST("/workflows/:id/steps/:n/ratify", lead(s.ratify))
	v1.POST("/workflows/:id/steps/:n/reverse", lead(s.reverse))
	v1.GET("/workflows/:id/steps/:n/evidence", anyone(s.evidence))

	v1.GET("/approvals", lead(s.listApprovals))
	v1.GET("/approvals/:id", anyone(s.getApproval))
	// Only a lead decides (the engine's approval floor, on every front,
	// which no bundle widens; the approver rules then narrow). A rep still
	// reaches the engine, so that one trying her own call is told it is
	// hers (requester_cannot_approve, as the seed's table has it); every
	// other role is refused here already, with the floor's own answer.
	v1.POST("/approvals/:id/approve", s.deciders(s.approve))
	v1.POST("/approvals/:id/reject", s.deciders(s.reject))

	v1.GET("/switches", op(s.switches))
	v1.PUT("/switches/:tool", op(s.setSwitch))
	v1.GET("/modes", op(s.modes))
	v1.PUT("/modes/:tool", op(s.setMode))
	v1.GET("/shadow/report", op(s.shadowReport))
	v1.GET("/effectiveness", s.role(engine.RoleOperator, engine.RoleLead)(s.effectiveness))
	v1.POST("/credentials/epoch", op(s.raiseEpoch))
	v1.GET("/bundles", op(s.bundles))
	v1.GET("/bundles/active", op(s.activeBundle))
	v1.GET("/bundles/:digest", op(s.bundle))
	v1.GET("/bundles/:digest/archive", op(s.bundleArchive))
	v1.POST("/bundles", op(s.uploadBundle))
	v1.POST("/bundles/:digest/approve", op(s.approveBundle))
	v1.POST("/bundles/:digest/activate", op(s.rollbackBundle))
	v1.GET("/decisions", s.role(engine.RoleOperator, engine.RoleLead)(s.decisions))
	v1.GET("/audit", op(s.auditList))
	v1.GET("/audit/verify", op(s.auditVerify))
	v1.GET("/audit/checkpoints", op(s.auditCheckpoints))
	v1.POST("/reconciliations", op(s.reconcile))
	v1.GET("/reconciliations/latest", op(s.latestReconciliation))

	// The group's catch-all (behind authenticate, like every /v1 path)
	// answers a known path asked with another method 405 with Allow.
	v1.RouteNotFound("/*", methodNotAllowed(e.Routes(), "/v1/"))
}

// methodNotAllowed answers a request no route took: 405 with the methods
// of the routes under prefix whose path it matches, 404 when none does.
func methodNotAllowed(routes []*echo.Route, prefix string) echo.HandlerFunc {
	allowed := map[string][]string{} // route path -> methods
	for _, r := range routes {
		if strings.HasPrefix(r.Path, prefix) && !strings.HasSuffix(r.Path, "*") && r.Method != echo.RouteNotFound {
			allowed[r.Path] = append(allowed[r.Path], r.Method)
		}
	}
	return func(c echo.Context) error {
		var methods []string
		for path, ms := range allowed {
			if matchRoute(path, c.Request().URL.Path) {
				methods = append(methods, ms...)
			}
		}
		if len(methods) == 0 {
			return echo.ErrNotFound
		}
		slices.Sort(methods)
		c.Response().Header().Set(echo.HeaderAllow, strings.Join(slices.Compact(methods), ", "))
		return echo.ErrMethodNotAllowed
	}
}

// matchRoute reports whether path matches route, an Echo path whose
// :name segments match any one non-empty segment.
func matchRoute(route, path string) bool {
	rs, ps := strings.Split(route, "/"), strings.Split(path, "/")
	if len(rs) != len(ps) {
		return false
	}
	for i := range rs {
		if strings.HasPrefix(rs[i], ":") && ps[i] != "" || rs[i] == ps[i] {
			continue
		}
		return false
	}
	return true
}

// authenticate verifies the bearer token of every /v1 request.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		raw, err := authn.FromHeaders(c.Request().Header.Values(echo.HeaderAuthorization))
		if err != nil {
			return err
		}
		p, err := s.opts.Auth.Verify(c.Request().Context(), raw)
		if err != nil {
			return err
		}
		c.Set(principalKey, p)
		return next(c)
	}
}

// deciders admits the roles that may reach the engine to approve or reject:
// a lead, and a rep (whose own call the engine refuses as hers). Anyone
// else gets the answer of the engine's floor, engine.ForbiddenRole.
func (s *Server) deciders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if r := person(c).Role; r != engine.RoleLead && r != engine.RoleRep {
			return &engine.ApprovalRefused{Code: string(engine.ForbiddenRole)}
		}
		return next(c)
	}
}

// role admits only callers with one of roles.
func (s *Server) role(roles ...string) func(echo.HandlerFunc) echo.HandlerFunc {
	return func(h echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if p := person(c); !slices.Contains(roles, p.Role) {
				return newError(http.StatusForbidden, "forbidden_role", "this endpoint is for the %v role; your token's role is %q", roles, p.Role)
			}
			return h(c)
		}
	}
}

func person(c echo.Context) engine.Person {
	p, _ := c.Get(principalKey).(authn.Principal)
	return engine.Person{ID: p.ID, Role: p.Role, Region: p.Region, Scopes: p.Scopes,
		RefundCeiling: p.RefundCeiling, ApproveLimit: p.ApproveLimit, Expires: p.Expires}
}

// ready answers whether this sidecar can decide. On a store several
// sidecars share it first loads the bundle the store records as active,
// which another sidecar may have activated: one that joined the fleet
// before any bundle was active becomes ready with the first.
func (s *Server) ready(c echo.Context) error {
	if s.opts.Store.Shared() {
		if err := s.opts.Releases.Follow(c.Request().Context()); err != nil {
			s.log.Warn("not ready: the fleet's active bundle does not load", "err", err)
			return newError(http.StatusServiceUnavailable, "not_ready", "the fleet's active bundle does not load here; the sidecar's log says why")
		}
	}
	if s.opts.Policy.Revision() == "" {
		return newError(http.StatusServiceUnavailable, "not_ready", "no policy bundle is active; an operator must activate one")
	}
	if err := s.opts.Engine.Ping(); err != nil {
		s.log.Warn("not ready: the store cannot be read", "err", err)
		return newError(http.StatusServiceUnavailable, "not_ready", "the store cannot be read; the sidecar's log says why")
	}
	return c.JSON(http.StatusOK, readyAnswer{Status: "ready", PolicyRevision: s.opts.Policy.Revision(), Version: buildinfo.Read()})
}

// metrics serves a scrape with h. On a store the fleet shares it first
// follows the bundle another sidecar may have activated, as /readyz does,
// so that countersign_active_bundle names the fleet's bundle even on a
// sidecar that has decided nothing since. A failure to follow is logged,
// and the page still served: it is what shows the sidecar's trouble.
func (s *Server) metrics(h http.Handler) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.opts.Store != nil && s.opts.Store.Shared() {
			if err := s.opts.Releases.Follow(c.Request().Context()); err != nil {
				s.log.Warn("metrics: the fleet's active bundle does not load", "err", err)
			}
		}
		h.ServeHTTP(c.Response(), c.Request())
		return nil
	}
}

func (s *Server) jwks(c echo.Context) error {
	b, err := s.opts.Credentials.JWKSJSON()
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.Blob(http.StatusOK, "application/jwk-set+json", b)
}

func (s *Server) tools(c echo.Context) error {
	return c.JSON(http.StatusOK, newTools(tool.All()))
}

// newBounds is how a request that opens a workflow narrows its bounds.
type newBounds struct {
	MaxSteps *int         `json:"max_steps"`
	MaxSpend *money.Cents `json:"max_spend"`
	Deadline *time.Time   `json:"deadline"`
}

func (s *Server) createWorkflow(c echo.Context) error {
	var req struct {
		Ticket       string    `json:"ticket"`
		ID           *string   `json:"id"`
		AgentVersion string    `json:"agent_version"`
		Bounds       newBounds `json:"bounds"`
	}
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	id := ""
	if req.ID != nil {
		if id = *req.ID; id == "" {
			return newError(http.StatusUnprocessableEntity, "invalid_request", "id: empty; give 1 to 64 letters, digits, '.', '_' or '-', or leave id out for one made for you")
		}
	}
	w, created, err := s.opts.Engine.OpenWorkflow(c.Request().Context(), person(c),
		engine.NewWorkflow{ID: id, Ticket: req.Ticket, AgentVersion: req.AgentVersion, Bounds: engine.Bounds(req.Bounds)})
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.JSON(status, newWorkflowView(w))
}

// proposeStep proposes a call in workflow {id}. With a ticket it also
// opens the workflow when the id is not in use yet, in the transaction
// that admits the step (engine.ProposeOpening): one request per governed
// call, as POST /v1/workflows and this one did in two.
func (s *Server) proposeStep(c echo.Context) error {
	var req struct {
		Tool         string          `json:"tool"`
		Args         json.RawMessage `json:"args"`
		Reason       string          `json:"reason"`
		Ticket       *string         `json:"ticket"`
		AgentVersion string          `json:"agent_version"`
		Bounds       *newBounds      `json:"bounds"`
	}
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Tool == "" {
		return newError(http.StatusUnprocessableEntity, "invalid_request", "tool: required; GET /v1/tools lists them")
	}
	ctx, p, id, name := c.Request().Context(), person(c), c.Param("id"), tool.Name(req.Tool)
	var step store.Step
	var err error
	switch {
	case req.Ticket != nil:
		nw := engine.NewWorkflow{ID: id, Ticket: *req.Ticket, AgentVersion: req.AgentVersion}
		if req.Bounds != nil {
			nw.Bounds = engine.Bounds(*req.Bounds)
		}
		step, err = s.opts.Engine.ProposeOpening(ctx, p, nw, name, req.Args, req.Reason)
	case req.AgentVersion != "" || req.Bounds != nil:
		return newError(http.StatusUnprocessableEntity, "invalid_request",
			"ticket: required with agent_version or bounds, which open the workflow; give the ticket too, or leave them out to propose into a workflow already open")
	default:
		step, err = s.opts.Engine.ProposeWithReason(ctx, p, id, name, req.Args, req.Reason)
	}
	if err != nil {
		return err
	}
	return s.stepAnswer(c, step)
}

func (s *Server) amendStep(c echo.Context) error {
	n, err := stepNumber(c)
	if err != nil {
		return err
	}
	var req struct {
		Args json.RawMessage `json:"args"`
	}
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	step, err := s.opts.Engine.Amend(c.Request().Context(), person(c), c.Param("id"), n, req.Args)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.stepView(c, step))
}

func (s *Server) resume(c echo.Context) error {
	if err := noBody(c); err != nil {
		return err
	}
	snap, err := s.opts.Engine.Resume(c.Request().Context(), person(c), c.Param("id"))
	if err != nil && snap.Workflow.ID == "" {
		return err
	}
	if err != nil {
		// Some step could not go on (a system of record is down); the
		// workflow says where each step stands.
		s.log.Warn("resume incomplete", "workflow", snap.Workflow.ID, "err", err)
	}
	return c.JSON(http.StatusOK, snapshotView(snap))
}

// stepView shows one step with its approval, read once. A step whose
// approval cannot be read is shown without it, as a workflow shows it.
func (s *Server) stepView(c echo.Context, st store.Step) client.Step {
	if st.Approval == "" {
		return newStepView(st, nil)
	}
	a, err := s.opts.Engine.Approval(c.Request().Context(), st.Approval)
	if err != nil {
		return newStepView(st, nil)
	}
	return newStepView(st, &a)
}

// stepAnswer answers a proposed step with the status code of its status.
func (s *Server) stepAnswer(c echo.Context, step store.Step) error {
	view := s.stepView(c, step)
	switch step.Status {
	case store.StepDone, store.StepSuppressed, store.StepShadowed:
		return c.JSON(http.StatusOK, view)
	case store.StepDenied:
		code, msg := "policy_denied", "denied by policy rule "+step.Rule
		if step.Decision != string(policy.Deny) {
			code, msg = "refused_downstream", step.Note
		}
		view.Error = &client.Error{Code: code, Message: msg, Rule: step.Rule}
		return c.JSON(http.StatusForbidden, view)
	default:
		return c.JSON(http.StatusAccepted, view)
	}
}

func (s *Server) listApprovals(c echo.Context) error {
	status := store.ApprovalStatus(c.QueryParam("status"))
	switch status {
	case "", store.ApprovalPending, store.ApprovalApproved, store.ApprovalUsed, store.ApprovalRejected, store.ApprovalExpired, store.ApprovalVoid:
	default:
		return newError(http.StatusBadRequest, "invalid_query", "status: %q is not an approval status; use one of pending, approved, used, rejected, expired, void, or leave it out for all", clip(string(status)))
	}
	all, err := boolQuery(c, "all")
	if err != nil {
		return err
	}
	approver, err := personQuery(c, "approver")
	if err != nil {
		return err
	}
	requester, err := personQuery(c, "requester")
	if err != nil {
		return err
	}
	list, err := s.opts.Engine.ApprovalQueue(c.Request().Context(), person(c),
		engine.ApprovalQuery{Status: status, All: all, Approver: approver, Requester: requester})
	if err != nil {
		return err
	}
	out := client.ApprovalList{Approvals: make([]client.Approval, 0, len(list))}
	for _, it := range list {
		out.Approvals = append(out.Approvals, newApprovalItemView(it))
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) getApproval(c echo.Context) error {
	p := person(c)
	it, err := s.opts.Engine.ApprovalDetail(c.Request().Context(), p, c.Param("id"))
	if err != nil {
		return err // another rep's approval is not_found, as an unknown id
	}
	return c.JSON(http.StatusOK, newApprovalItemView(it))
}

func (s *Server) approve(c echo.Context) error { return s.decideApproval(c, s.opts.Engine.Approve) }
func (s *Server) reject(c echo.Context) error  { return s.decideApproval(c, s.opts.Engine.Reject) }

func (s *Server) decideApproval(c echo.Context, act func(ctx context.Context, p engine.Person, id, comment string) (store.Approval, error)) error {
	comment, err := optionalComment(c)
	if err != nil {
		return err
	}
	a, err := act(c.Request().Context(), person(c), c.Param("id"), comment)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newApprovalView(a))
}

func (s *Server) switches(c echo.Context) error {
	sw, err := s.opts.Engine.Switches(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newSwitches(sw))
}

func (s *Server) setSwitch(c echo.Context) error {
	var req struct {
		Enabled *bool  `json:"enabled"`
		Reason  string `json:"reason"`
	}
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Enabled == nil {
		return newError(http.StatusUnprocessableEntity, "invalid_request", "enabled: required, true or false")
	}
	name := tool.Name(c.Param("tool"))
	if err := s.opts.Engine.SetSwitch(c.Request().Context(), person(c), name, *req.Enabled, req.Reason); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, client.Switch{Tool: string(name), Enabled: *req.Enabled})
}

func (s *Server) modes(c echo.Context) error {
	ms, err := s.opts.Engine.Modes(c.Request().Context())
	if err != nil {
		return err
	}
	out := client.ModeList{Modes: make([]client.Mode, 0, len(ms))}
	for _, m := range ms {
		out.Modes = append(out.Modes, newModeView(m))
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) setMode(c echo.Context) error {
	var req struct {
		Mode   string `json:"mode"`
		Reason string `json:"reason"`
	}
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	m, err := s.opts.Engine.SetMode(c.Request().Context(), person(c), tool.Name(c.Param("tool")), policy.Mode(req.Mode), req.Reason)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newModeView(m))
}

// raiseEpoch rotates the signing key; an optional "reason" goes into the
// audit record, as a switch's does.
func (s *Server) raiseEpoch(c echo.Context) error {
	var req struct {
		Reason string `json:"reason"`
	}
	if err := optionalBody(c, &req); err != nil {
		return err
	}
	if err := engine.CheckReason(req.Reason); err != nil {
		return err
	}
	n, err := s.opts.Credentials.Raise(c.Request().Context())
	if err != nil {
		return err
	}
	s.log.Info("credential epoch raised", "epoch", n, "by", person(c).ID)
	detail := map[string]any{"epoch": n}
	if req.Reason != "" {
		detail["reason"] = req.Reason
	}
	if err := s.opts.Engine.RecordEvent(c.Request().Context(), audit.Record{Kind: audit.KindEpoch, Actor: person(c).ID,
		Detail: detail}); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, client.Epoch{Epoch: n})
}

func (s *Server) bundles(c echo.Context) error {
	h, err := s.opts.Releases.History(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newBundleViews(h))
}

func (s *Server) activeBundle(c echo.Context) error {
	rec, err := s.opts.Releases.Active(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newBundleView(rec))
}

// bundle is the last record of one bundle, by digest: the awaiting record
// a second operator reads before approving it.
func (s *Server) bundle(c echo.Context) error {
	rec, err := s.opts.Releases.Record(c.Request().Context(), c.Param("digest"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newBundleView(rec))
}

// bundleArchive is the .tar.gz of one bundle of the history, as it was
// uploaded: what `countersign bundle diff` compares.
func (s *Server) bundleArchive(c echo.Context) error {
	blob, err := s.opts.Releases.Archive(c.Request().Context(), c.Param("digest"))
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, "application/gzip", blob)
}

// uploadBundle activates a bundle .tar.gz through the gate, or, for an
// operator with ?break_glass=true&reason=..., without its verdict; a
// bundle that is not a pure tightening of the active one, or breaks the
// glass, waits for a second operator (202, with its review). With
// ?dry_run=true it only answers what the gate, the replay of recent
// decisions and the review make of it.
func (s *Server) uploadBundle(c echo.Context) error {
	mt, _, _ := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType))
	switch mt {
	case "application/gzip", "application/x-gzip", "application/octet-stream", "application/x-tar+gzip":
	default:
		return newError(http.StatusBadRequest, "unsupported_content_type", "send the bundle .tar.gz as Content-Type: application/gzip")
	}
	a := policy.Activation{By: person(c).ID, Reason: c.QueryParam("reason")}
	var err error
	if a.BreakGlass, err = boolQuery(c, "break_glass"); err != nil {
		return err
	}
	dryRun, err := boolQuery(c, "dry_run")
	if err != nil {
		return err
	}
	if a.BreakGlass && a.Reason == "" {
		return newError(http.StatusUnprocessableEntity, "reason_required", "a break-glass activation needs ?reason=... saying why the gate is skipped")
	}
	if dryRun && a.BreakGlass {
		return newError(http.StatusBadRequest, "invalid_query", "dry_run and break_glass: choose one; a dry run activates nothing")
	}
	body, err := readBundle(c)
	if err != nil {
		return err
	}
	if dryRun {
		report, imp, rv, err := s.opts.Releases.Preview(c.Request().Context(), body)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, client.BundlePreview{Gate: newGateReport(report), Impact: newImpact(imp), Review: newReview(rv)})
	}
	rec, _, err := s.opts.Releases.Activate(c.Request().Context(), body, a)
	return s.activated(c, rec, err)
}

// approveBundle is a second operator's approval of a bundle that awaits one.
func (s *Server) approveBundle(c echo.Context) error {
	rec, _, err := s.opts.Releases.Approve(c.Request().Context(), c.Param("digest"), person(c).ID)
	return s.activated(c, rec, err)
}

// rollbackBundle activates again a bundle the history holds.
func (s *Server) rollbackBundle(c echo.Context) error {
	rec, _, err := s.opts.Releases.Rollback(c.Request().Context(), c.Param("digest"), person(c).ID)
	return s.activated(c, rec, err)
}

// activated answers an activation: 201 with the active record, 202 when a
// second operator must approve it, or the error.
func (s *Server) activated(c echo.Context, rec store.BundleRecord, err error) error {
	var aw *policy.AwaitingError
	switch {
	case errors.As(err, &aw):
		return c.JSON(http.StatusAccepted, client.AwaitingBundle{Status: client.BundleAwaiting, Revision: aw.Revision, Digest: aw.Digest,
			LimitChanges: append([]client.LimitChange{}, newLimitChanges(aw.Loosens)...), Message: aw.Error(),
			Impact: storedImpact(rec), Review: storedReview(rec)})
	case err != nil:
		return err
	}
	return c.JSON(http.StatusCreated, newBundleView(rec))
}

// boolQuery reads an optional true/false query parameter. Every query
// parameter that does not parse is a 400 invalid_query that names it.
func boolQuery(c echo.Context, name string) (bool, error) {
	switch c.QueryParam(name) {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	}
	return false, newError(http.StatusBadRequest, "invalid_query", "%s: %q is neither true nor false", name, clip(c.QueryParam(name)))
}

// personQuery reads an optional query parameter that names a person (a
// token's sub): one that no token could carry is a 400 invalid_query
// rather than a filter that silently matches nothing.
func personQuery(c echo.Context, name string) (string, error) {
	v := c.QueryParam(name)
	if v == "" {
		return "", nil
	}
	if _, err := identity.Canonical(v); err != nil || len(v) > authn.MaxSubjectBytes {
		return "", newError(http.StatusBadRequest, "invalid_query", "%s: %q is not a person's id (a token's sub, such as lead-eli)", name, clip(v))
	}
	return v, nil
}

// readBundle reads an upload under the bundle's own bound, which the
// server's body limit skips for this route (isBundleUpload), so that an
// oversized bundle is told bundle_too_large, like one that unpacks too large.
func readBundle(c echo.Context) ([]byte, error) {
	req := c.Request()
	if req.ContentLength > policy.MaxArchiveBytes {
		return nil, fmt.Errorf("%w: upload of %d bytes", policy.ErrBundleTooLarge, req.ContentLength)
	}
	body, err := readBody(http.MaxBytesReader(c.Response(), req.Body, policy.MaxArchiveBytes))
	if errors.Is(err, echo.ErrStatusRequestEntityTooLarge) {
		return nil, fmt.Errorf("%w: upload over %d bytes", policy.ErrBundleTooLarge, policy.MaxArchiveBytes)
	}
	return body, err
}

// isBundleUpload skips the server's body limit for POST /v1/bundles, which
// applies the bundle's own bound (readBundle).
func isBundleUpload(c echo.Context) bool {
	return c.Request().Method == http.MethodPost && c.Path() == "/v1/bundles"
}

// The page sizes of GET /v1/decisions.
const (
	defaultDecisionLimit = 100
	maxDecisionLimit     = 1000
)

func (s *Server) decisions(c echo.Context) error {
	ndjson, err := format(c)
	if err != nil {
		return err
	}
	if ndjson {
		return s.streamDecisions(c)
	}
	if err := onlyStreamed(c, "from", "rep", "rule"); err != nil {
		return err
	}
	f, limit, err := decisionQuery(c)
	if err != nil {
		return err
	}
	page, err := s.opts.Engine.Decisions(c.Request().Context(), f, limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newDecisionsAnswer(page))
}

// decisionQuery reads since, until, workflow, limit and cursor. A
// parameter that does not parse or is out of bounds is a 400 invalid_query
// that names it.
func decisionQuery(c echo.Context) (f store.DecisionFilter, limit int, err error) {
	f.Workflow = c.QueryParam("workflow")
	for _, p := range []struct {
		name string
		to   *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := c.QueryParam(p.name); v != "" {
			if *p.to, err = time.Parse(time.RFC3339, v); err != nil {
				return f, 0, newError(http.StatusBadRequest, "invalid_query",
					"%s: %q is not an RFC 3339 time; write it like 2026-11-29T09:00:00Z", p.name, clip(v))
			}
		}
	}
	limit = defaultDecisionLimit
	if v := c.QueryParam("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > maxDecisionLimit {
			return f, 0, newError(http.StatusBadRequest, "invalid_query",
				"limit: %q is not a whole number from 1 to %d (default %d)", clip(v), maxDecisionLimit, defaultDecisionLimit)
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

// auditList answers a page of the audit chain. A limit or an after that
// does not parse is a 400 invalid_query that names it, as for the
// decision log.
func (s *Server) auditList(c echo.Context) error {
	ndjson, err := format(c)
	if err != nil {
		return err
	}
	if ndjson {
		return s.streamAudit(c)
	}
	if err := onlyStreamed(c, "from", "since", "until", "workflow", "rep", "rule"); err != nil {
		return err
	}
	limit := 0
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > audit.MaxLimit {
			return newError(http.StatusBadRequest, "invalid_query",
				"limit: %q is not a whole number from 1 to %d (default %d)", clip(v), audit.MaxLimit, audit.DefaultLimit)
		}
		limit = n
	}
	after := c.QueryParam("after")
	page, err := s.opts.Audit.List(s.opts.Store, after, limit)
	if errors.Is(err, audit.ErrCursor) {
		return newError(http.StatusBadRequest, "invalid_query",
			"after: %q is not a record id; pass next as the previous page answered it, or leave after out to start at the beginning", clip(after))
	}
	if err != nil {
		return err
	}
	if page.Records == nil {
		page.Records = []audit.Record{}
	}
	return c.JSON(http.StatusOK, newAuditPage(page))
}

func (s *Server) auditVerify(c echo.Context) error {
	report, err := audit.Verify(s.opts.Store)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newAuditVerification(report))
}

func (s *Server) reconcile(c echo.Context) error {
	if err := noBody(c); err != nil {
		return err
	}
	r, err := s.opts.Reconcile.Run(c.Request().Context())
	if err != nil {
		return newError(http.StatusServiceUnavailable, "system_unavailable", "reconciliation could not read a system of record: %v", err)
	}
	if s.opts.Unexplained != nil {
		s.opts.Unexplained.Set(float64(r.Unexplained))
	}
	return c.JSON(http.StatusOK, newReconciliation(r))
}

func (s *Server) shadowReport(c echo.Context) error {
	r, err := s.opts.Reconcile.Shadow(c.Request().Context())
	if err != nil {
		return newError(http.StatusServiceUnavailable, "system_unavailable", "the shadow report could not read a system of record: %v", err)
	}
	return c.JSON(http.StatusOK, r)
}

// effectiveness reports the controls' record per tool and agent version
// since ?since= (RFC 3339; all time when absent).
func (s *Server) effectiveness(c echo.Context) error {
	var since time.Time
	if v := c.QueryParam("since"); v != "" {
		var err error
		if since, err = time.Parse(time.RFC3339, v); err != nil {
			return newError(http.StatusBadRequest, "invalid_query", "since: %q is not an RFC 3339 time; write it like 2026-11-29T09:00:00Z", clip(v))
		}
	}
	r, err := effectiveness.Compute(s.opts.Store, since, s.opts.Clock.Now())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

func (s *Server) latestReconciliation(c echo.Context) error {
	r, ok, err := s.opts.Reconcile.Latest()
	if err != nil {
		return err
	}
	if !ok {
		return newError(http.StatusNotFound, "not_found", "no reconciliation has run yet: POST /v1/reconciliations")
	}
	return c.JSON(http.StatusOK, newReconciliation(r))
}

// stepNumber reads the :n path parameter.
func stepNumber(c echo.Context) (int, error) {
	n, err := strconv.Atoi(c.Param("n"))
	if err != nil || n < 1 {
		return 0, newError(http.StatusNotFound, "not_found", "step %q: steps are numbered from 1", c.Param("n"))
	}
	return n, nil
}

// optionalComment decodes an optional {"comment"} body.
func optionalComment(c echo.Context) (string, error) {
	var req struct {
		Comment string `json:"comment"`
	}
	if c.Request().ContentLength != 0 {
		if err := decodeJSON(c, &req); err != nil {
			return "", err
		}
	}
	return req.Comment, nil
}

// ratify accepts an executed refund after the fact with a retroactive
// approval recorded as such.
func (s *Server) ratify(c echo.Context) error {
	n, err := stepNumber(c)
	if err != nil {
		return err
	}
	comment, err := optionalComment(c)
	if err != nil {
		return err
	}
	a, err := s.opts.Engine.Ratify(c.Request().Context(), person(c), c.Param("id"), n, comment)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newApprovalView(a))
}

// reverse has the ledger post a reversal of an executed refund.
func (s *Server) reverse(c echo.Context) error {
	n, err := stepNumber(c)
	if err != nil {
		return err
	}
	comment, err := optionalComment(c)
	if err != nil {
		return err
	}
	step, err := s.opts.Engine.Reverse(c.Request().Context(), person(c), c.Param("id"), n, comment)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.stepView(c, step))
}
