package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/countersign/countersign/sidecar/client"
)

// A stream that ends inside a line, as a sidecar's cut export does, is an
// error, not a shorter log; the whole lines before it were written.
func TestAnExportCutShortIsAnError(t *testing.T) {
	for _, c := range []struct {
		name, body string
		lines      int
		err        error
	}{
		{"whole", "{\"id\":\"a\"}\n{\"id\":\"b\"}\n", 2, nil},
		{"cut inside a line", "{\"id\":\"a\"}\n{\"id\":", 1, io.ErrUnexpectedEOF},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Query().Get("format") != "ndjson" || r.URL.Query().Get("rep") != "rep-ana" {
					t.Errorf("query %s", r.URL.RawQuery)
				}
				w.Header().Set("Content-Type", "application/x-ndjson")
				io.WriteString(w, c.body)
			}))
			defer srv.Close()
			cl, err := client.New(srv.URL, "token")
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			n, err := cl.ExportAudit(context.Background(), client.AuditExport{Rep: "rep-ana"}, &out)
			if n != c.lines || !errors.Is(err, c.err) || err == nil && c.err != nil {
				t.Errorf("%d lines, %v; want %d, %v", n, err, c.lines, c.err)
			}
		})
	}
}

// A refusal is the API's error, with its code.
func TestAnExportRefusedIsTheAPIsError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"error":{"code":"forbidden_role","message":"operators only"}}`)
	}))
	defer srv.Close()
	cl, err := client.New(srv.URL, "token")
	if err != nil {
		t.Fatal(err)
	}
	_, err = cl.ExportDecisionLog(context.Background(), client.DecisionExport{}, io.Discard)
	var ae *client.Error
	if !errors.As(err, &ae) || ae.Code != "forbidden_role" {
		t.Errorf("err %v, want the API's forbidden_role", err)
	}
}
