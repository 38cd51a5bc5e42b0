package sidecar

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/oklog/ulid/v2"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/store"
)

// The streamed exports: GET /v1/audit?format=ndjson and GET
// /v1/decisions?format=ndjson answer every record the query selects, one
// JSON object a line (Content-Type application/x-ndjson), each line the
// same object the JSON page shows. They read the log a page at a time,
// each page in a read transaction of its own, and flush each page to the
// client before reading the next: a running sidecar exports a log of any
// size in the memory of one page, and holds no read transaction open
// while a slow client reads.
//
// A failure after the first line cannot change the status any more: the
// stream is cut (the connection closed without the end of the chunked
// body), so a client sees an incomplete answer as an error, never as a
// shorter log. The failure is in the log, with the request id.

// ndjsonType is the media type of the streamed exports.
const ndjsonType = "application/x-ndjson"

// format reads the format parameter: "" and "json" page, "ndjson" streams.
func format(c echo.Context) (ndjson bool, err error) {
	switch v := c.QueryParam("format"); v {
	case "", "json":
		return false, nil
	case "ndjson":
		return true, nil
	default:
		return false, newError(http.StatusBadRequest, "invalid_query", "format: %q is neither json (pages, the default) nor ndjson (every record, streamed)", clip(v))
	}
}

// onlyStreamed refuses on a JSON page the parameters that only an ndjson
// export takes, rather than answering a page that ignores them.
func onlyStreamed(c echo.Context, names ...string) error {
	for _, n := range names {
		if c.QueryParam(n) != "" {
			return newError(http.StatusBadRequest, "invalid_query", "%s: filters the streamed export only; add format=ndjson", n)
		}
	}
	return nil
}

// stream writes lines to the client, a page at a time.
type stream struct {
	c       echo.Context
	enc     *json.Encoder
	started bool
}

func newStream(c echo.Context) *stream {
	return &stream{c: c, enc: json.NewEncoder(c.Response())}
}

// start sends the status and the headers, once.
func (s *stream) start() {
	if s.started {
		return
	}
	s.started = true
	h := s.c.Response().Header()
	h.Set(echo.HeaderContentType, ndjsonType)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	s.c.Response().WriteHeader(http.StatusOK)
}

func (s *stream) line(v any) error {
	s.start()
	return s.enc.Encode(v)
}

// flush sends what the page wrote (the headers at least).
func (s *stream) flush() {
	s.start()
	s.c.Response().Flush()
}

// fail ends the stream on err: before any line, as the error answer it is;
// after, by cutting the connection (see above).
func (s *Server) fail(st *stream, err error) error {
	if !st.started {
		return err
	}
	s.log.Error("export cut short", "request_id", st.c.Response().Header().Get(echo.HeaderXRequestID),
		"path", st.c.Path(), "err", err)
	panic(http.ErrAbortHandler)
}

// positionQuery reads an optional whole number parameter at least min.
func positionQuery(c echo.Context, name string, min uint64, what string) (uint64, error) {
	v := c.QueryParam(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n < min {
		return 0, newError(http.StatusBadRequest, "invalid_query", "%s: %q is not %s", name, clip(v), what)
	}
	return n, nil
}

// timeQuery reads an optional RFC 3339 parameter.
func timeQuery(c echo.Context, name string) (time.Time, error) {
	v := c.QueryParam(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return t, newError(http.StatusBadRequest, "invalid_query", "%s: %q is not an RFC 3339 time; write it like 2026-11-29T09:00:00Z", name, clip(v))
	}
	return t, nil
}

// auditExport is what GET /v1/audit?format=ndjson selects.
type auditExport struct {
	// From is the chain position (from 0, as verify's index counts) of the
	// first record; After the id the export starts after. At most one.
	From  uint64
	After string
	// Since and Until bound the records' at: Since inclusive, Until
	// exclusive.
	Since, Until time.Time
	// Workflow, Rep and Rule keep the records of one workflow, of the
	// workflows of one rep (and the records the rep made), and the
	// decisions of one rule.
	Workflow, Rep, Rule string
}

func auditExportQuery(c echo.Context) (q auditExport, err error) {
	if c.QueryParam("limit") != "" {
		return q, newError(http.StatusBadRequest, "invalid_query", "limit: pages only; format=ndjson streams every record the query selects")
	}
	if q.From, err = positionQuery(c, "from", 0, "a chain position (a whole number from 0, as GET /v1/audit/verify and the evidence count them)"); err != nil {
		return q, err
	}
	q.After = c.QueryParam("after")
	if q.After != "" {
		if _, perr := ulid.ParseStrict(q.After); perr != nil {
			return q, newError(http.StatusBadRequest, "invalid_query", "after: %q is not a record id", clip(q.After))
		}
		if q.From > 0 {
			return q, newError(http.StatusBadRequest, "invalid_query", "from and after: choose one; both say where the export starts")
		}
	}
	if q.Since, err = timeQuery(c, "since"); err != nil {
		return q, err
	}
	if q.Until, err = timeQuery(c, "until"); err != nil {
		return q, err
	}
	if q.Rep, err = personQuery(c, "rep"); err != nil {
		return q, err
	}
	q.Workflow, q.Rule = c.QueryParam("workflow"), c.QueryParam("rule")
	return q, nil
}

// start is the id to read after: After, or, for Since alone, the
// greatest id of the millisecond before it. A record's id is never
// earlier than its at (audit.Log.Append), so no record at or after Since
// lies before that; From counts from the start, so it reads from there.
func (q auditExport) start() string {
	switch {
	case q.After != "":
		return q.After
	case q.From == 0 && q.Since.UnixMilli() > 0:
		var id ulid.ULID
		for i := range id {
			id[i] = 0xff
		}
		if err := id.SetTime(uint64(q.Since.UnixMilli() - 1)); err != nil {
			return ""
		}
		return id.String()
	}
	return ""
}

// keeps reports whether r is selected, owner giving a workflow's rep.
func (q auditExport) keeps(r audit.Record, owner func(string) string) bool {
	switch {
	case !q.Since.IsZero() && r.At.Before(q.Since),
		!q.Until.IsZero() && !r.At.Before(q.Until),
		q.Workflow != "" && r.Workflow != q.Workflow,
		q.Rule != "" && r.Detail["rule"] != q.Rule:
		return false
	case q.Rep != "":
		return r.Actor == q.Rep || r.Workflow != "" && owner(r.Workflow) == q.Rep
	}
	return true
}

// streamAudit answers GET /v1/audit?format=ndjson. The chain is read in
// key order to its end; Until is a filter, not an end, because records
// chained later on a fleet may carry an earlier at.
func (s *Server) streamAudit(c echo.Context) error {
	q, err := auditExportQuery(c)
	if err != nil {
		return err
	}
	st, owners := newStream(c), s.workflowOwners()
	after, pos := q.start(), uint64(0)
	for {
		page, err := s.opts.Audit.List(s.opts.Store, after, audit.MaxLimit)
		if err != nil {
			return s.fail(st, err)
		}
		for _, r := range page.Records {
			at := pos
			pos++
			if at < q.From || !q.keeps(r, owners) {
				continue
			}
			if err := st.line(newAuditRecord(r)); err != nil {
				return s.fail(st, err)
			}
		}
		st.flush()
		if page.Next == "" {
			return nil
		}
		after = page.Next
	}
}

// ownerCache bounds the workflows whose rep a streamed export remembers.
const ownerCache = 4096

// workflowOwners returns a function giving a workflow's rep ("" for one
// that cannot be read), remembering the last few thousand: the records of
// one workflow lie close together in the chain.
func (s *Server) workflowOwners() func(string) string {
	seen := map[string]string{}
	return func(id string) string {
		if u, ok := seen[id]; ok {
			return u
		}
		var w store.Workflow
		err := s.opts.Store.View(func(tx *store.Tx) (err error) {
			w, err = tx.Workflow(id)
			return err
		})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			s.log.Warn("export: a workflow's rep could not be read", "workflow", id, "err", err)
		}
		if len(seen) == ownerCache {
			clear(seen)
		}
		seen[id] = w.User
		return w.User
	}
}

// decisionExport is what GET /v1/decisions?format=ndjson selects beyond
// the store's filter.
type decisionExport struct {
	f         store.DecisionFilter
	rep, rule string
}

func decisionExportQuery(c echo.Context) (q decisionExport, err error) {
	if c.QueryParam("limit") != "" {
		return q, newError(http.StatusBadRequest, "invalid_query", "limit: pages only; format=ndjson streams every decision the query selects")
	}
	if c.QueryParam("cursor") != "" && c.QueryParam("from") != "" {
		return q, newError(http.StatusBadRequest, "invalid_query", "from and cursor: choose one; both say where the export starts")
	}
	if q.f, _, err = decisionQuery(c); err != nil {
		return q, err
	}
	from, err := positionQuery(c, "from", 1, "a decision's seq (a whole number from 1)")
	if err != nil {
		return q, err
	}
	if from > 0 {
		q.f.After = from - 1
	}
	if q.rep, err = personQuery(c, "rep"); err != nil {
		return q, err
	}
	q.rule = c.QueryParam("rule")
	return q, nil
}

// streamDecisions answers GET /v1/decisions?format=ndjson, a page of the
// store's at a time.
func (s *Server) streamDecisions(c echo.Context) error {
	q, err := decisionExportQuery(c)
	if err != nil {
		return err
	}
	st := newStream(c)
	for {
		page, err := s.opts.Engine.Decisions(c.Request().Context(), q.f, maxDecisionLimit)
		if err != nil {
			return s.fail(st, err)
		}
		for _, d := range page.Decisions {
			if q.rep != "" && d.User != q.rep || q.rule != "" && d.Rule != q.rule {
				continue
			}
			if err := st.line(newDecision(engine.NewLogEntry(d))); err != nil {
				return s.fail(st, err)
			}
		}
		st.flush()
		if page.Next == 0 {
			return nil
		}
		q.f.After = page.Next
	}
}
