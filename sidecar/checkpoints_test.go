package sidecar_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/cmd/stack"
	"github.com/countersign/countersign/executor/audit"
)

// The keys that sign the audit's checkpoints are public, as a JWK set
// whose key ids are the keys' thumbprints: the key in the data directory,
// made on the first start and the same after a restart.
func TestTheAuditKeysArePublishedWithoutAToken(t *testing.T) {
	dir := t.TempDir()
	e := start(t, devstack.Options{DataDir: dir})
	r := e.send(t, http.MethodGet, "/.well-known/countersign-audit-keys", nil, nil)
	r.want(t, http.StatusOK, "")
	if ct := r.header.Get("Content-Type"); ct != "application/jwk-set+json" {
		t.Errorf("Content-Type %q", ct)
	}
	keys, err := audit.ParseKeys(r.body)
	if err != nil || len(keys) != 1 {
		t.Fatalf("%v, %v: %s", keys, err, r.body)
	}
	key, created, err := audit.LoadOrCreateKey(filepath.Join(dir, stack.AuditKeyFile))
	if err != nil || created {
		t.Fatalf("the key in the data directory: created %v, %v", created, err)
	}
	if kid := audit.NewSigner(key).KeyID(); keys[kid] == nil {
		t.Fatalf("published %s, not the data directory's key %s", r.body, kid)
	}
	if _, err := os.Stat(filepath.Join(dir, stack.AuditKeyFile)); err != nil {
		t.Fatal(err)
	}
}

func TestCheckpointsAnswerJSONOrNDJSONToAnOperator(t *testing.T) {
	e := start(t, devstack.Options{})
	var page struct {
		Checkpoints []json.RawMessage `json:"checkpoints"`
	}
	e.call(t, http.MethodGet, "/v1/audit/checkpoints", "ops-ida", nil).decode(t, &page)
	if page.Checkpoints == nil {
		t.Fatal("checkpoints is not a list")
	}
	r := e.call(t, http.MethodGet, "/v1/audit/checkpoints?format=ndjson", "ops-ida", nil)
	r.want(t, http.StatusOK, "")
	if _, err := audit.ReadCheckpoints(bytes.NewReader(r.body)); err != nil || r.header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("%v, %s", err, r.header.Get("Content-Type"))
	}
	e.call(t, http.MethodGet, "/v1/audit/checkpoints?after=-1", "ops-ida", nil).want(t, http.StatusBadRequest, "invalid_query")
	e.call(t, http.MethodGet, "/v1/audit/checkpoints?format=csv", "ops-ida", nil).want(t, http.StatusBadRequest, "invalid_query")
	e.call(t, http.MethodGet, "/v1/audit/checkpoints", "rep-ana", nil).want(t, http.StatusForbidden, "forbidden_role")
}
