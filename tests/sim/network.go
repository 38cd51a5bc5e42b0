package sim

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"sort"
	"strings"
)

// Fate is what the simulated network does with one request.
type Fate string

// The fates of a request. Reads (GET) are only ever delivered, refused,
// answered 5xx or cut: a read has no effect to lose or repeat.
const (
	// Deliver: the receiver acts and its answer arrives.
	Deliver Fate = "deliver"
	// Refuse: no connection; the request is never sent.
	Refuse Fate = "refuse"
	// Unavailable: the receiver (a gateway in front of it) answers 503
	// without acting.
	Unavailable Fate = "5xx"
	// Drop: the request is sent and lost on the way; the sender times out.
	Drop Fate = "drop"
	// Cut: the receiver acts and its answer is lost.
	Cut Fate = "cut"
	// Duplicate: the request arrives twice; the first answer arrives.
	Duplicate Fate = "duplicate"
	// Delay: the request is held in the network and arrives later, when
	// the scheduler releases it; the sender times out now.
	Delay Fate = "delay"
)

// errTimeout is what the sender sees of a request sent and never answered.
var errTimeout = errors.New("sim network: no answer before the attempt's deadline")

// held is a request delayed in the network.
type held struct {
	host, method, path string
	header             http.Header
	body               []byte
	label              string
}

// network carries the engine's requests to the ledger and the order
// system in process: an http.RoundTripper that calls their handlers
// directly, with the fates drawn from the world's random source. It is
// called only on the scheduler goroutine (the engine dispatches on the
// goroutine that proposes or resumes).
type network struct {
	w      *world
	routes map[string]http.Handler
	// faulty is the probability that a request meets a fate other than
	// Deliver; zero once the world settles.
	faulty  float64
	delayed []held
	// hold holds up the next effect a sidecar sends (fleet.go): the
	// sidecar's goroutine waits in roundTrip until it is resumed.
	hold map[*sidecar]*paused
}

// roundTrip is one request of sc's through the simulated network.
func (n *network) roundTrip(sc *sidecar, req *http.Request) (*http.Response, error) {
	if p := n.hold[sc]; p != nil && req.Method == http.MethodPost {
		delete(n.hold, sc)
		close(p.held)
		<-p.resume
	}
	h, ok := n.routes[req.URL.Host]
	if !ok {
		return nil, fmt.Errorf("sim network: no system at %s", req.URL.Host)
	}
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	fate := n.fate(req.Method)
	label := req.URL.Host + " " + req.Method + " " + req.URL.Path
	n.w.tracef("net %s: %s %s", sc.name, label, fate)
	if fate == Refuse {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	}
	// Everything else was written to the wire: the client's trace learns
	// so, as it would from a real transport, and classifies what follows
	// as an outcome it cannot know.
	if tr := httptrace.ContextClientTrace(req.Context()); tr != nil && tr.WroteRequest != nil {
		tr.WroteRequest(httptrace.WroteRequestInfo{})
	}
	hd := held{host: req.URL.Host, method: req.Method, path: req.URL.RequestURI(), header: req.Header.Clone(), body: body, label: label}
	switch fate {
	case Unavailable:
		return answer(req, http.StatusServiceUnavailable, []byte(`{"error":{"code":"unavailable","message":"sim: receiver unavailable"}}`)), nil
	case Drop:
		return nil, errTimeout
	case Delay:
		n.delayed = append(n.delayed, hd)
		return nil, errTimeout
	}
	rec := n.serve(h, hd)
	switch fate {
	case Cut:
		return nil, io.ErrUnexpectedEOF
	case Duplicate:
		second := n.serve(h, hd)
		n.w.tracef("net %s duplicate answered %d", label, second.Code)
	}
	n.w.tracef("net %s answered %d", label, rec.Code)
	return answer(req, rec.Code, rec.Body.Bytes()), nil
}

// fate draws what happens to a request.
func (n *network) fate(method string) Fate {
	if n.faulty == 0 || n.w.rng.Float64() >= n.faulty {
		return Deliver
	}
	if method == http.MethodGet {
		return []Fate{Refuse, Unavailable, Cut}[n.w.rng.IntN(3)]
	}
	return []Fate{Refuse, Unavailable, Drop, Cut, Duplicate, Delay, Delay}[n.w.rng.IntN(7)]
}

// serve hands one copy of a request to its receiver, and holds
// InvEpoch on what it accepted.
func (n *network) serve(h http.Handler, hd held) *httptest.ResponseRecorder {
	r := httptest.NewRequest(hd.method, "http://"+hd.host+hd.path, bytes.NewReader(hd.body))
	r.Header = hd.header.Clone()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if hd.method == http.MethodPost && rec.Code < 300 {
		if epoch, ok := tokenEpoch(hd.header); ok && epoch < n.w.auth.Epoch() {
			n.w.violate(InvEpoch, "%s accepted %s with a token of epoch %d, revoked by epoch %d", hd.host, hd.label, epoch, n.w.auth.Epoch())
		}
	}
	return rec
}

// tokenEpoch reads the epoch claim of a request's bearer token, unverified
// (the receiver verified it; the harness only looks).
func tokenEpoch(h http.Header) (int, bool) {
	tok, ok := strings.CutPrefix(h.Get("Authorization"), "Bearer ")
	parts := strings.Split(tok, ".")
	if !ok || len(parts) != 3 {
		return 0, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	var claims struct {
		Epoch int `json:"epoch"`
	}
	if err != nil || json.Unmarshal(raw, &claims) != nil {
		return 0, false
	}
	return claims.Epoch, true
}

// keysTransport serves the sidecar's JWKS to the receivers in process,
// past the simulated network's faults: the keys' delivery is not what
// a seed searches.
type keysTransport struct{ h http.Handler }

func (k keysTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	k.h.ServeHTTP(rec, req)
	return answer(req, rec.Code, rec.Body.Bytes()), nil
}

// release delivers up to k of the delayed requests (all when k < 0),
// chosen at random; their answers go nowhere.
func (n *network) release(k int) {
	if k < 0 || k > len(n.delayed) {
		k = len(n.delayed)
	}
	for ; k > 0; k-- {
		i := n.w.rng.IntN(len(n.delayed))
		hd := n.delayed[i]
		n.delayed = append(n.delayed[:i], n.delayed[i+1:]...)
		rec := n.serve(n.routes[hd.host], hd)
		n.w.tracef("net %s late, answered %d", hd.label, rec.Code)
	}
}

func answer(req *http.Request, status int, body []byte) *http.Response {
	return &http.Response{
		Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"application/json"}},
		Body:    io.NopCloser(bytes.NewReader(body)),
		Request: req, ContentLength: int64(len(body)),
	}
}

// sortedKeys is m's keys in order, for a trace that does not depend on
// map iteration.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
