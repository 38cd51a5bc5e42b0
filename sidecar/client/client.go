package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/countersign/countersign/executor/strictjson"
)

// maxAnswer bounds how much of an answer the client reads: the API's
// largest answers (a decision page, an audit page) are far below it.
const maxAnswer = 32 << 20

// Client speaks to one sidecar as one person. It is safe for concurrent
// use.
type Client struct {
	base   *url.URL
	token  string
	http   *http.Client
	strict bool
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sends every request through h (default: a client with no
// timeout of its own; bound calls with their context).
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// Strict refuses an answer with a field this client does not know, a
// duplicate key or a wrong type, instead of ignoring it (see the package
// documentation).
func Strict() Option { return func(c *Client) { c.strict = true } }

// New returns a client of the sidecar at baseURL (http or https, with or
// without a trailing slash) presenting token as the bearer of every call.
func New(baseURL, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimSuffix(baseURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("client: sidecar URL %q: %w", baseURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: sidecar URL %q: want http://host:port or https://host", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("client: sidecar URL %q: a base URL has no query or fragment", baseURL)
	}
	if token == "" {
		return nil, errors.New("client: empty bearer token")
	}
	c := &Client{base: u, token: token, http: &http.Client{}}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// call sends method path (built from segments escaped by seg) with body
// (nil: none) marshalled as JSON, and decodes a 2xx answer into out (nil:
// ignore it). Any other answer is an *Error.
func (c *Client) call(ctx context.Context, method, path string, query url.Values, body, out any) error {
	_, err := c.do(ctx, method, path, query, body, out)
	return err
}

// answer is the status and the body of an answer, for the calls that read
// more than the decoded value: which 2xx it was, or the body of an error
// that carries a value (a denied step).
type answer struct {
	status int
	header http.Header
	body   []byte
}

// do is call that also returns the answer.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body, out any) (answer, error) {
	op := method + " " + path
	target := c.base.String() + path
	if q := query.Encode(); q != "" {
		target += "?" + q
	}
	var rd io.Reader
	contentType := "application/json"
	switch b := body.(type) {
	case nil:
	case gzipBody:
		rd, contentType = bytes.NewReader(b), "application/gzip"
	default:
		j, err := json.Marshal(body)
		if err != nil {
			return answer{}, fmt.Errorf("%s: encoding the body: %w", op, err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return answer{}, fmt.Errorf("%s: %w", op, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return answer{}, fmt.Errorf("%s: %w", op, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer))
	a := answer{status: res.StatusCode, header: res.Header, body: b}
	if err != nil {
		return a, fmt.Errorf("%s: reading the answer: %w", op, err)
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return a, apiError(res, b)
	}
	if out == nil {
		return a, nil
	}
	if err := c.decode(b, out); err != nil {
		return a, fmt.Errorf("%s: decoding the answer: %w", op, err)
	}
	return a, nil
}

// gzipBody is a request body sent as it is, as application/gzip (a
// bundle's .tar.gz), rather than marshalled as JSON.
type gzipBody []byte

// decode reads an answer, strictly when the client was made Strict.
func (c *Client) decode(b []byte, out any) error {
	if c.strict {
		return strictjson.Decode(b, out)
	}
	return json.Unmarshal(b, out)
}

// apiError reads the API's error body of a non-2xx answer. A body of
// another shape is kept, shortened, as the message.
func apiError(res *http.Response, b []byte) *Error {
	var body GateFailedBody // an ErrorBody, and the failures of a gate_failed
	if err := json.Unmarshal(b, &body); err != nil || body.Error == nil || body.Error.Code == "" {
		msg := strings.TrimSpace(string(b))
		if len(msg) > 200 {
			msg = msg[:200] + "..."
		}
		if msg == "" {
			msg = res.Status
		}
		return &Error{Status: res.StatusCode, Message: msg, RequestID: res.Header.Get("X-Request-Id")}
	}
	e := body.Error
	e.Status, e.RequestID, e.Failures = res.StatusCode, body.RequestID, body.Failures
	if e.RequestID == "" {
		e.RequestID = res.Header.Get("X-Request-Id")
	}
	return e
}

// seg escapes one path segment: an id never reaches another endpoint.
func seg(s string) string { return url.PathEscape(s) }
