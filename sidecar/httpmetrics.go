package sidecar

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
)

// unmatchedRoute is the route label of a request that matched no route
// (404, or 405 on a path routed for other methods).
const unmatchedRoute = "unmatched"

// standardMethods are the methods of RFC 9110 and PATCH; others are
// counted as "other".
var standardMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true, http.MethodPatch: true,
	http.MethodDelete: true, http.MethodConnect: true, http.MethodOptions: true, http.MethodTrace: true,
}

// httpMetrics is countersign_http_request_duration_seconds{method, route,
// code}. The route is Echo's template (/v1/workflows/:id), never the URL,
// so that ids do not make a series each; a request that matched no route
// counts as route="unmatched", since its path is whatever a client sent.
type httpMetrics struct {
	duration *prometheus.HistogramVec
	// routes holds "METHOD template" for every route served.
	routes map[string]bool
}

// newHTTPMetrics registers the histogram with reg. A histogram already
// registered there (a second server on the same registry) is shared.
func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "countersign_http_request_duration_seconds",
		Help: "Time to answer an HTTP request, by method, route template (\"unmatched\" for none) and status code.",
		// The defaults, and the long waits of ?wait= (up to 60 s).
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"method", "route", "code"})
	if err := reg.Register(h); err != nil {
		var already prometheus.AlreadyRegisteredError
		if !errors.As(err, &already) {
			return nil, fmt.Errorf("sidecar: register HTTP metrics: %w", err)
		}
		existing, ok := already.ExistingCollector.(*prometheus.HistogramVec)
		if !ok {
			return nil, fmt.Errorf("sidecar: register HTTP metrics: %w", err)
		}
		h = existing
	}
	return &httpMetrics{duration: h, routes: map[string]bool{}}, nil
}

// learn records the routes e serves; call it once they are all added.
func (m *httpMetrics) learn(e *echo.Echo) {
	for _, r := range e.Routes() {
		if r.Method != echo.RouteNotFound {
			m.routes[r.Method+" "+r.Path] = true
		}
	}
}

// middleware observes each request once its answer is written. It sits
// outside the request log, which hands a handler's error to the error
// handler, so the status it reads is the one the client got.
func (m *httpMetrics) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil && !c.Response().Committed {
			c.Error(err) // write the answer now, to count its status
		}
		method := c.Request().Method
		if !standardMethods[method] {
			method = "other" // a client may send any token as a method
		}
		route := c.Path()
		if !m.routes[method+" "+route] {
			route = unmatchedRoute
		}
		code := strconv.Itoa(c.Response().Status)
		m.duration.WithLabelValues(method, route, code).Observe(time.Since(start).Seconds())
		return err
	}
}
