package devstack_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/sidecar/authn"
)

// TestStartRefusesWhatAPersonMustFix: a data directory held by a running
// stack, an address in use and a data directory that cannot be created are
// each a *StartError of their kind, in the dev stack and the production
// wiring alike, and the failed Start leaves nothing running (it used to
// panic in Close).
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
	production := &devstack.External{LedgerURL: "http://127.0.0.1:1", OrdersURL: "http://127.0.0.1:1",
		Issuers: []authn.Issuer{{Name: "idp", JWKSFile: filepath.Join(file, "jwks.json")}}}

	for _, tc := range []struct {
		name     string
		o        devstack.Options
		kind     error
		wantText string
	}{
		{"a data dir held by a running stack is locked", devstack.Options{DataDir: running}, devstack.ErrDataDirLocked, "pid"},
		{"an address in use is refused", devstack.Options{Listen: busy}, devstack.ErrAddrInUse, busy},
		{"a data dir under a regular file is unwritable", devstack.Options{DataDir: filepath.Join(file, "data")}, devstack.ErrDataDirUnwritable, "not a directory"},
		{"production: a held data dir is locked", devstack.Options{DataDir: running, External: production}, devstack.ErrDataDirLocked, "pid"},
		{"production: an address in use is refused", devstack.Options{Listen: busy, External: production}, devstack.ErrAddrInUse, busy},
		{"production: a data dir under a regular file is unwritable", devstack.Options{DataDir: filepath.Join(file, "data"), External: production}, devstack.ErrDataDirUnwritable, "not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.o.DataDir == "" {
				tc.o.DataDir = t.TempDir()
			}
			st, err := devstack.Start(context.Background(), tc.o)
			var se *devstack.StartError
			if st != nil || !errors.Is(err, tc.kind) || !errors.As(err, &se) {
				t.Fatalf("Start = %v, %v; want a *StartError %v", st, err, tc.kind)
			}
			if tc.kind == devstack.ErrDataDirLocked && se.PID != os.Getpid() {
				t.Errorf("holder pid %d, want this process, %d", se.PID, os.Getpid())
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, tc.wantText) {
				t.Errorf("message %q is not one line naming %q", msg, tc.wantText)
			}
		})
	}
	// The refused starts did not disturb the running stack's lock holder.
	if _, err := store.Open(filepath.Join(running, devstack.StoreFile), store.Options{Timeout: 1}); !errors.Is(err, store.ErrLocked) {
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
