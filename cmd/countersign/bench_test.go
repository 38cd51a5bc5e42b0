package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestBenchHelpListsTheFlags(t *testing.T) {
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"bench", "--help"})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--agents", "--duration", "--baseline", "--sidecar", "--data", "--store", "--sidecars", "--store-latency", "--json"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("bench --help lacks %s:\n%s", want, out.String())
		}
	}
}

// A refused option stops the command before anything starts.
func TestBenchRefusesABaselineOutOfProcess(t *testing.T) {
	root := newRootCmd()
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"bench", "--sidecar", "http://127.0.0.1:1", "--data", t.TempDir(), "--baseline"})
	err := root.ExecuteContext(context.Background())
	if err == nil || !strings.Contains(err.Error(), "--baseline needs the in-process stack") {
		t.Fatalf("bench --sidecar ... --baseline = %v, want the baseline refused", err)
	}
}

// --store-latency without --store is refused before anything starts, with
// what to do.
func TestBenchRefusesAStoreLatencyWithoutAStore(t *testing.T) {
	root := newRootCmd()
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"bench", "--store-latency", "1ms"})
	err := root.ExecuteContext(context.Background())
	if err == nil || !strings.Contains(err.Error(), "--store-latency needs --store postgres://") {
		t.Fatalf("bench --store-latency 1ms = %v, want it refused for want of --store", err)
	}
}
