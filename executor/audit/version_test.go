package audit_test

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/store"
)

// The hash of a new record is sha256 over the RFC 8785 form of the record
// as exported, without its hash: written out here by hand, as a reviewer
// with any JCS implementation would get it. ">" stays ">" (Go's encoder
// writes \u003e, which made reviewers' scripts disagree).
func TestANewRecordHashesTheRFC8785FormOfItself(t *testing.T) {
	db, log, _ := setup(t)
	got := mustAppend(t, db, log, audit.Record{Kind: audit.KindDecision, Actor: "rep-ana", Workflow: "W1", N: 2,
		Args:   []byte(`{"order":"O-1002", "amount": 12000}`),
		Detail: map[string]any{"rule": "amount > limit", "ratio": 4.50}})[0]
	if got.Version != audit.VersionJCS {
		t.Fatalf("version %d, want %d", got.Version, audit.VersionJCS)
	}
	canonical := `{"actor":"rep-ana","args":{"amount":12000,"order":"O-1002"},"at":"2026-11-29T09:00:00Z",` +
		`"detail":{"ratio":4.5,"rule":"amount > limit"},"id":"` + got.ID + `","kind":"decision","n":2,"prev":"",` +
		`"version":1,"workflow":"W1"}`
	sum := sha256.Sum256([]byte(canonical))
	if want := hex.EncodeToString(sum[:]); got.Hash != want {
		c, _ := got.Canonical()
		t.Fatalf("hash %s, want %s over\n%s\ngot over\n%s", got.Hash, want, canonical, c)
	}
}

// A record chained before versions (no "version" member) keeps verifying
// by the rule it was made by, and the chain goes on after it by the new
// rule.
func TestARecordOfTheLegacyRuleStillVerifies(t *testing.T) {
	db, log, _ := setup(t)
	const id = "01KB5Y4QG0ABCDEFGHJKMNPQRS"
	legacy := `{"actor":"rep-ana","at":"2026-11-29T08:00:00Z","detail":{"rule":"amount \u003e limit"},"id":"` + id +
		`","kind":"decision","prev":""}`
	sum := sha256.Sum256([]byte("\n" + legacy))
	hash := hex.EncodeToString(sum[:])
	stored := `{"id":"` + id + `","at":"2026-11-29T08:00:00Z","kind":"decision","actor":"rep-ana",` +
		`"detail":{"rule":"amount \u003e limit"},"prev":"","hash":"` + hash + `"}`
	if err := db.Update(func(tx *store.Tx) error { return tx.AppendAudit([]byte(id), []byte(stored)) }); err != nil {
		t.Fatal(err)
	}
	next := mustAppend(t, db, log, refund(1))[0]
	if next.Prev != hash || next.Version != audit.VersionJCS {
		t.Fatalf("the next record has prev %s version %d; want %s, %d", next.Prev, next.Version, hash, audit.VersionJCS)
	}
	rep, err := audit.Verify(db)
	if err != nil || !rep.OK || rep.Records != 2 {
		t.Fatalf("verify: %+v, %v", rep, err)
	}
}

// A record naming a rule this build does not know is reported as such,
// not as an edit.
func TestARecordOfAnUnknownVersionIsNamed(t *testing.T) {
	db, _, _ := setup(t)
	const id = "01KB5Y4QG0ABCDEFGHJKMNPQRS"
	stored := `{"id":"` + id + `","at":"2026-11-29T08:00:00Z","kind":"decision","actor":"rep-ana","version":9,"prev":"","hash":"00"}`
	if err := db.Update(func(tx *store.Tx) error { return tx.AppendAudit([]byte(id), []byte(stored)) }); err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Verify(db)
	if err != nil || rep.OK || rep.Broken.Reason != audit.ReasonVersion {
		t.Fatalf("verify: %+v, %v; want broken at 0: %s", rep, err, audit.ReasonVersion)
	}
}

// BenchmarkSum is the cost of hashing one decision record by each rule:
// the JCS rule decodes the record's JSON and writes it again.
func BenchmarkSum(b *testing.B) {
	db, log, _ := setup(b)
	r := mustAppend(b, db, log, refund(1))[0]
	for _, v := range []struct {
		name    string
		version int
	}{{"legacy", audit.VersionLegacy}, {"jcs", audit.VersionJCS}} {
		b.Run(v.name, func(b *testing.B) {
			r.Version = v.version
			for b.Loop() {
				if _, err := r.Sum(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
