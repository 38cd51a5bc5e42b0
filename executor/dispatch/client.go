package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"time"
)

// maxAnswerBytes bounds what a client reads of an answer.
const maxAnswerBytes = 4 << 20

// DefaultHTTPClient returns the client the systems' clients use when given
// none: kept-alive connections that idle out well before the simulators
// close them (so a request never goes out on a connection the server is
// closing), and no client-wide timeout: the Dispatcher bounds each attempt.
func DefaultHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.IdleConnTimeout = 30 * time.Second
	// Go keeps 2 idle connections per host by default: under concurrent
	// steps every other request would dial anew and leave a TIME_WAIT.
	t.MaxIdleConnsPerHost = maxIdlePerSystem
	return &http.Client{Transport: t}
}

// maxIdlePerSystem is how many kept-alive connections to one system stay
// open between requests: enough for the steps one sidecar runs at once.
const maxIdlePerSystem = 256

// client is the HTTP plumbing shared by Ledger and Orders.
type client struct {
	system string
	base   string
	hc     *http.Client
}

func newClient(system, baseURL string, hc *http.Client) client {
	if hc == nil {
		hc = DefaultHTTPClient()
	}
	return client{system: system, base: strings.TrimRight(baseURL, "/"), hc: hc}
}

// request is one call to a system of record.
type request struct {
	method, path string
	token, key   string
	body         any // marshalled as JSON when non-nil
}

// exchange sends q and decodes a 2xx answer into out. It returns the
// answer's header, or a *Refused, a *Transient or an error wrapping
// ErrOutcomeUnknown.
func (c client) exchange(ctx context.Context, q request, out any) (http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, q.method, c.base+q.path, nil)
	if err != nil {
		return nil, fmt.Errorf("dispatch: %s %s: %w", q.method, q.path, err)
	}
	if q.body != nil {
		b, err := json.Marshal(q.body)
		if err != nil {
			return nil, fmt.Errorf("dispatch: %s %s: %w", q.method, q.path, err)
		}
		// Not a *bytes.Reader: the transport must not be able to rewind it
		// and re-send the request on its own (see the package doc).
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if q.token != "" {
		req.Header.Set("Authorization", "Bearer "+q.token)
	}
	if q.key != "" {
		req.Header.Set("Idempotency-Key", q.key)
	}
	var sent atomic.Bool
	req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) { sent.Store(i.Err == nil) },
	}))
	resp, err := c.hc.Do(req)
	if err != nil {
		if sent.Load() {
			return nil, fmt.Errorf("%w: %s %s %s: %w", ErrOutcomeUnknown, c.system, q.method, q.path, err)
		}
		return nil, &Transient{System: c.system, Err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s %s: answer %d cut off: %w", ErrOutcomeUnknown, c.system, q.method, q.path, resp.StatusCode, err)
	}
	if resp.StatusCode >= 300 {
		code, msg := errorBody(resp.StatusCode, raw)
		if resp.StatusCode >= 500 {
			return nil, &Transient{System: c.system, Status: resp.StatusCode, Code: code, Message: msg}
		}
		return nil, &Refused{System: c.system, Status: resp.StatusCode, Code: code, Message: msg}
	}
	if err := json.Unmarshal(raw, out); err != nil {
		// The system said yes but what it did cannot be read.
		return nil, fmt.Errorf("%w: %s %s %s: answer %d unreadable: %w", ErrOutcomeUnknown, c.system, q.method, q.path, resp.StatusCode, err)
	}
	return resp.Header, nil
}

// errorBody reads {"error":{"code","message"}}, falling back to the status.
func errorBody(status int, raw []byte) (code, msg string) {
	var b struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &b) == nil && b.Error.Code != "" {
		return b.Error.Code, b.Error.Message
	}
	msg = strings.TrimSpace(string(raw))
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	return fmt.Sprintf("http_%d", status), msg
}
