package devstack_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/cmd/stack"
	"github.com/countersign/countersign/executor/store"
)

// TestStartRefusesWhatAPersonMustFix: a data directory held by a running
// stack, an address in use and a data directory that cannot be created are
// each a *stack.StartError of their kind, and the failed Start leaves
// nothing running (it used to panic in Close). cmd/stack's tests hold the
// production wiring to the same.
func TestStartRefusesWhatAPersonMustFix(t *testing.T) {
	running := t.TempDir()
	first, err := devstack.Start(context.Background(), devstack.Options{DataDir: running})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.Close() })
	busy := strings.TrimPrefix(first.Endpoints.Sidecar, "http://")
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name     string
		o        devstack.Options
		kind     error
		wantText string
	}{
		{"a data dir held by a running stack is locked", devstack.Options{DataDir: running}, stack.ErrDataDirLocked, "pid"},
		{"an address in use is refused", devstack.Options{Listen: busy}, stack.ErrAddrInUse, busy},
		{"a data dir under a regular file is unwritable", devstack.Options{DataDir: filepath.Join(file, "data")}, stack.ErrDataDirUnwritable, "not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.o.DataDir == "" {
				tc.o.DataDir = t.TempDir()
			}
			st, err := devstack.Start(context.Background(), tc.o)
			var se *stack.StartError
			if st != nil || !errors.Is(err, tc.kind) || !errors.As(err, &se) {
				t.Fatalf("Start = %v, %v; want a *StartError %v", st, err, tc.kind)
			}
			if tc.kind == stack.ErrDataDirLocked && se.PID != os.Getpid() {
				t.Errorf("holder pid %d, want this process, %d", se.PID, os.Getpid())
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, tc.wantText) {
				t.Errorf("message %q is not one line naming %q", msg, tc.wantText)
			}
		})
	}
	// The refused starts did not disturb the running stack's lock holder.
	if _, err := store.Open(filepath.Join(running, stack.StoreFile), store.Options{Timeout: 1}); !errors.Is(err, store.ErrLocked) {
		t.Fatalf("the running stack's store: %v, want still locked", err)
	}
}

func TestCloseIsSafeOnNilAndTwice(t *testing.T) {
	var none *devstack.Stack
	if err := none.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := devstack.Start(context.Background(), devstack.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
