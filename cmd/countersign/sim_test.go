package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSimCommand runs each simulator as the command does, reads the printed
// address, talks to it and stops it with the context, as SIGTERM would.
func TestSimCommand(t *testing.T) {
	for _, tc := range []struct {
		system, path string
		args         []string
		want         string
	}{
		{"ledger", "/_sim/faults", []string{"--lose-write", "2", "--wrong-amount", "1"}, `"lose_write":2`},
		{"orders", "/orders/O-1001/shipments", nil, `{"shipments":[]}`},
	} {
		t.Run(tc.system, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			out, w := io.Pipe()
			root := newRootCmd()
			root.SetOut(w)
			root.SetArgs(append([]string{"sim", tc.system, "--data", t.TempDir(), "--jwks", "http://127.0.0.1:1/.well-known/jwks.json"}, tc.args...))
			done := make(chan error, 1)
			go func() { done <- root.ExecuteContext(ctx); _ = w.Close() }()

			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil {
				t.Fatalf("no address printed: %v (command: %v)", err, <-done)
			}
			go func() { _, _ = io.Copy(io.Discard, out) }()
			_, url, ok := strings.Cut(strings.TrimSpace(line), " listening on ")
			if !ok {
				t.Fatalf("printed %q", line)
			}
			resp, err := http.Get(url + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(body), tc.want) {
				t.Fatalf("GET %s: %d %s", tc.path, resp.StatusCode, body)
			}
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("command ended with %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the command did not stop when its context ended")
			}
		})
	}
}

func TestSimCommandRefusesBadInput(t *testing.T) {
	for name, args := range map[string][]string{
		"unknown system":           {"sim", "bank", "--data", "x", "--jwks", "http://x"},
		"no data":                  {"sim", "ledger", "--jwks", "http://x"},
		"wrong amount on orders":   {"sim", "orders", "--data", "DIR", "--jwks", "http://x", "--wrong-amount", "1"},
		"negative counter":         {"sim", "ledger", "--data", "DIR", "--jwks", "http://x", "--lose-write", "-1"},
		"negative jwks max age":    {"sim", "ledger", "--data", "DIR", "--jwks", "http://x", "--jwks-max-age", "-1s"},
		"listen address not valid": {"sim", "ledger", "--data", "DIR", "--jwks", "http://x", "--listen", "256.0.0.1:x"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			for i, a := range args {
				if a == "DIR" {
					args[i] = dir
				}
			}
			root := newRootCmd()
			root.SetOut(io.Discard)
			root.SetErr(io.Discard)
			root.SetArgs(args)
			if err := root.ExecuteContext(context.Background()); err == nil {
				t.Fatalf("%v: accepted", args)
			}
		})
	}
}
