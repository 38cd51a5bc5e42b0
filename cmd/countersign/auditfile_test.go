package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/audit"
)

// checkpointSink is the HTTP endpoint outside the sidecar that keeps the
// checkpoints posted to it, one JSON object per line.
type checkpointSink struct {
	mu    sync.Mutex
	lines bytes.Buffer
	last  uint64
	got   chan uint64
}

func (k *checkpointSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	cp, err := audit.DecodeCheckpoint(b)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if cp.Position > k.last {
		k.last = cp.Position
		k.lines.Write(b)
		k.lines.WriteByte('\n')
		k.got <- cp.Position
	}
}

// A reviewer's path while the sidecar runs: export the chain (GET
// /v1/audit), take the published keys and the checkpoints (the sink's
// copies, or GET /v1/audit/checkpoints?format=ndjson), and verify offline.
// One changed record fails; so does the whole chain rewritten with every
// hash recomputed, against the checkpoints.
func TestAnExportVerifiesOfflineAgainstTheCheckpointsTheSinkReceived(t *testing.T) {
	k := &checkpointSink{got: make(chan uint64, 64)}
	sink := httptest.NewServer(k)
	defer sink.Close()
	data := t.TempDir()
	st, err := devstack.Start(context.Background(), devstack.Options{DataDir: data,
		AuditCheckpoint: audit.CheckpointRule{Every: 1}, AuditCheckpointURL: sink.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	seedDecisions(t, st)

	var page struct {
		Records []json.RawMessage `json:"records"`
	}
	if status, body := apiCall(t, st, http.MethodGet, "/v1/audit?limit=1000", "ops-ida", nil); status != http.StatusOK || json.Unmarshal(body, &page) != nil {
		t.Fatalf("GET /v1/audit: %d %s", status, body)
	}
	for deadline := time.After(60 * time.Second); ; { // waits for an event: the sink's copy of the last position
		var p uint64
		select {
		case p = <-k.got:
		case <-deadline:
			t.Fatalf("the sink has no checkpoint at position %d after a minute", len(page.Records))
		}
		if p >= uint64(len(page.Records)) {
			break
		}
	}

	// The sidecar's own check matches the chain against them too.
	var v struct {
		OK          bool   `json:"ok"`
		Records     int    `json:"records"`
		Checkpoints int    `json:"checkpoints"`
		Anchored    uint64 `json:"anchored"`
	}
	if _, body := apiCall(t, st, http.MethodGet, "/v1/audit/verify", "ops-ida", nil); json.Unmarshal(body, &v) != nil ||
		!v.OK || v.Checkpoints == 0 || v.Anchored != uint64(v.Records) {
		t.Fatalf("GET /v1/audit/verify: %s", body)
	}

	dir := t.TempDir()
	write := func(name string, b []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	var lines []string
	for _, r := range page.Records {
		var b bytes.Buffer
		if err := json.Compact(&b, r); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, b.String())
	}
	file := write("audit.ndjson", []byte(strings.Join(lines, "\n")+"\n"))
	_, keys := apiCall(t, st, http.MethodGet, "/.well-known/countersign-audit-keys", "ops-ida", nil)
	key := write("keys.json", keys)
	k.mu.Lock()
	sunk := write("sink.ndjson", k.lines.Bytes())
	k.mu.Unlock()
	status, served := apiCall(t, st, http.MethodGet, "/v1/audit/checkpoints?format=ndjson", "ops-ida", nil)
	if status != http.StatusOK {
		t.Fatalf("GET /v1/audit/checkpoints: %d %s", status, served)
	}
	fromAPI := write("api.ndjson", served)

	for _, cps := range []string{sunk, fromAPI} {
		out, err := runAuditVerify(t, file, "--checkpoints", cps, "--key", key)
		if err != nil || !strings.HasPrefix(out, "ok: ") {
			t.Fatalf("the export against %s: %v\n%s", filepath.Base(cps), err, out)
		}
	}

	// A stopped sidecar's export writes both files itself.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	exported, exportedCps := filepath.Join(dir, "export.ndjson"), filepath.Join(dir, "export-checkpoints.ndjson")
	cmd := newRootCmd()
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"audit", "export", "--data", data, "-o", exported, "--checkpoints", exportedCps})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	if out, err := runAuditVerify(t, exported, "--checkpoints", exportedCps, "--key", key); err != nil || !strings.HasPrefix(out, "ok: ") {
		t.Fatalf("audit export --checkpoints: %v\n%s", err, out)
	}

	wantBroken := func(t *testing.T, path, want string) {
		t.Helper()
		out, err := runAuditVerify(t, path, "--checkpoints", sunk, "--key", key)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != exitAuditBroken || !strings.Contains(out, want) {
			t.Fatalf("got %v, output\n%s\nwant exit %d and %q", err, out, exitAuditBroken, want)
		}
	}
	t.Run("one record changed", func(t *testing.T) {
		changed := strings.Replace(strings.Join(lines, "\n"), `"amount":3000`, `"amount":300`, 1)
		if changed == strings.Join(lines, "\n") {
			t.Fatal("no refund of 3000 in the export")
		}
		wantBroken(t, write("changed.ndjson", []byte(changed+"\n")), audit.ReasonHash)
	})
	t.Run("the whole chain rewritten without the key", func(t *testing.T) {
		var recs []audit.Record
		for _, l := range lines {
			r, err := audit.Decode([]byte(l))
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, r)
		}
		var b bytes.Buffer
		for i := range recs {
			if i == 1 {
				recs[i].Actor = "someone-else"
			}
			if i > 0 {
				recs[i].Prev = recs[i-1].Hash
			}
			if recs[i].Hash, err = recs[i].Sum(); err != nil {
				t.Fatal(err)
			}
			json.NewEncoder(&b).Encode(recs[i])
		}
		wantBroken(t, write("rewritten.ndjson", b.Bytes()), audit.ReasonCheckpointHead)
	})
}

func TestVerifyingAFileNeedsCheckpointsAndAKey(t *testing.T) {
	out, err := runAuditVerify(t, "audit.ndjson")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitAuditUnverified || !strings.Contains(err.Error(), "--checkpoints F") {
		t.Fatalf("%v\n%s", err, out)
	}
}
