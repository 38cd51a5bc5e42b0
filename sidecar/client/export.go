package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// AuditExport selects what ExportAudit streams. Zero values leave a
// parameter out: from the start of the chain, every record.
type AuditExport struct {
	// From is a chain position (from 0); After a record id. At most one.
	From  uint64
	After string
	// Since is inclusive, Until exclusive.
	Since, Until time.Time
	// Workflow, Rep and Rule: one workflow's records, the records of a
	// rep's workflows (and those the rep made), one rule's decisions.
	Workflow, Rep, Rule string
}

func (q AuditExport) values() url.Values {
	v := url.Values{"format": {"ndjson"}}
	if q.From > 0 {
		v.Set("from", strconv.FormatUint(q.From, 10))
	}
	setNonEmpty(v, "after", q.After)
	setTime(v, "since", q.Since)
	setTime(v, "until", q.Until)
	setNonEmpty(v, "workflow", q.Workflow)
	setNonEmpty(v, "rep", q.Rep)
	setNonEmpty(v, "rule", q.Rule)
	return v
}

// DecisionExport selects what ExportDecisionLog streams. Zero values leave
// a parameter out.
type DecisionExport struct {
	// From is the seq of the first decision (from 1).
	From                uint64
	Since, Until        time.Time
	Workflow, Rep, Rule string
}

func (q DecisionExport) values() url.Values {
	v := url.Values{"format": {"ndjson"}}
	if q.From > 0 {
		v.Set("from", strconv.FormatUint(q.From, 10))
	}
	setTime(v, "since", q.Since)
	setTime(v, "until", q.Until)
	setNonEmpty(v, "workflow", q.Workflow)
	setNonEmpty(v, "rep", q.Rep)
	setNonEmpty(v, "rule", q.Rule)
	return v
}

func setNonEmpty(v url.Values, name, s string) {
	if s != "" {
		v.Set(name, s)
	}
}

func setTime(v url.Values, name string, t time.Time) {
	if !t.IsZero() {
		v.Set(name, t.Format(time.RFC3339Nano))
	}
}

// ExportAudit streams the audit records q selects (GET /v1/audit?format=
// ndjson) to w as the sidecar sends them, one JSON object a line, and
// returns how many lines it wrote. An operator's call. A stream the
// sidecar cut short is an error (io.ErrUnexpectedEOF), never a shorter
// log; so is a last line without its newline.
func (c *Client) ExportAudit(ctx context.Context, q AuditExport, w io.Writer) (int, error) {
	return c.stream(ctx, "/v1/audit", q.values(), w)
}

// ExportDecisionLog streams the decisions q selects (GET /v1/decisions?
// format=ndjson) to w, as ExportAudit does the audit.
func (c *Client) ExportDecisionLog(ctx context.Context, q DecisionExport, w io.Writer) (int, error) {
	return c.stream(ctx, "/v1/decisions", q.values(), w)
}

// ExportCheckpoints streams the audit's signed checkpoints (GET
// /v1/audit/checkpoints?format=ndjson) to w, as ExportAudit does the
// records, for an offline verify of an export.
func (c *Client) ExportCheckpoints(ctx context.Context, w io.Writer) (int, error) {
	return c.stream(ctx, "/v1/audit/checkpoints", url.Values{"format": {"ndjson"}}, w)
}

// stream copies an ndjson answer to w line by line.
func (c *Client) stream(ctx context.Context, path string, query url.Values, w io.Writer) (int, error) {
	op := "GET " + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base.String()+path+"?"+query.Encode(), nil)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/x-ndjson")
	res, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	defer res.Body.Close()
	if res.StatusCode < 200 || res.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(res.Body, maxAnswer))
		return 0, apiError(res, b)
	}
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt != "application/x-ndjson" {
		return 0, fmt.Errorf("%s: the answer is %q, not application/x-ndjson: is this a countersign sidecar that streams exports?", op, mt)
	}
	r := bufio.NewReader(res.Body)
	n := 0
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] != '\n' {
			return n, fmt.Errorf("%s: the stream ended inside line %d: %w", op, n+1, io.ErrUnexpectedEOF)
		}
		if len(line) > 0 {
			if _, werr := w.Write(line); werr != nil {
				return n, werr
			}
			n++
		}
		switch {
		case errors.Is(err, io.EOF):
			return n, nil
		case err != nil:
			return n, fmt.Errorf("%s: after %d lines: %w", op, n, err)
		}
	}
}
