package sidecar

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
)

// A failure after the first line of an export cuts the connection through
// every middleware (Recover included): the client's read ends in an error,
// not in a body that looks whole. Before the first line it is the API's
// error answer.
func TestAFailedExportIsCutNotEnded(t *testing.T) {
	srv, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv.echo.GET("/cut-after-a-line", func(c echo.Context) error {
		st := newStream(c)
		if err := st.line(map[string]int{"n": 1}); err != nil {
			return err
		}
		st.flush()
		return srv.fail(st, errors.New("the store went away"))
	})
	srv.echo.GET("/cut-before-a-line", func(c echo.Context) error {
		return srv.fail(newStream(c), newError(http.StatusServiceUnavailable, "unavailable", "the store went away"))
	})
	ts := httptest.NewServer(srv)
	defer ts.Close()

	res, err := http.Get(ts.URL + "/cut-after-a-line")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || string(body) != "{\"n\":1}\n" || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("after a line: %d %q, %v; want the line, then io.ErrUnexpectedEOF", res.StatusCode, body, err)
	}

	res, err = http.Get(ts.URL + "/cut-before-a-line")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Content-Type") != "application/json" {
		t.Errorf("before a line: %d %s %s; want the error answer", res.StatusCode, res.Header.Get("Content-Type"), body)
	}
}
