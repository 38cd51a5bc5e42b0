package audit_test

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"time"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/store"
)

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// The engine records a state change in the same transaction that makes it:
// if the Update fails, neither the change nor its record exists.
func Example() {
	dir, _ := os.MkdirTemp("", "audit-example")
	defer os.RemoveAll(dir)
	db, err := store.Open(filepath.Join(dir, "sidecar.db"), store.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	log := audit.New(audit.Options{
		Clock:   fixedClock{time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)},
		Entropy: rand.New(rand.NewSource(1)), // seeded: the drill's ids repeat run to run
	})

	err = db.Update(func(tx *store.Tx) error {
		// ... the engine's own writes (the decision, the step marked started) ...
		if _, err := log.Append(tx, audit.Record{
			Kind: audit.KindDecision, Actor: "rep-ana", Workflow: "W1", N: 1, Tool: "issue_refund",
			Args:   []byte(`{"amount":3000,"order":"O-1001"}`),
			Detail: map[string]any{"decision": "ALLOW", "rule": "R3", "revision": "p1"},
		}); err != nil {
			return err
		}
		_, err := log.Append(tx, audit.Record{
			Kind: audit.KindDispatch, Actor: audit.ActorEngine, Workflow: "W1", N: 1, Tool: "issue_refund",
			Detail: map[string]any{"jti": "01JD5Z8Q7R3M2K9X4V6B1N0C8T", "aud": "ledger", "scope": "refund", "epoch": 1},
		})
		return err
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	page, _ := log.List(db, "", 10)
	for _, r := range page.Records {
		fmt.Println(r.Kind, r.Actor, r.Tool, string(r.Args), r.Prev == "")
	}
	rep, _ := audit.Verify(db)
	fmt.Println("ok:", rep.OK, "records:", rep.Records)
	// Output:
	// decision rep-ana issue_refund {"amount":3000,"order":"O-1001"} true
	// dispatch engine issue_refund  false
	// ok: true records: 2
}
