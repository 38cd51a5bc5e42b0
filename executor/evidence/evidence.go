package evidence

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/store"
)

// Evidence is what the records say about one step.
type Evidence struct {
	Workflow store.Workflow
	Step     store.Step
	// Decision is the last decision the log holds for the step (the one
	// its outcome rests on), nil when none was logged; Decisions counts
	// them all (a step decided again after an amendment or a resume has
	// several).
	Decision  *store.Decision
	Decisions int
	// Approval is the step's approval, nil when it had none.
	Approval *store.Approval
	// Effect is what the system of record answered, nil when nothing was
	// done.
	Effect *Effect
	// Records are the audit records about the step in chain order, with
	// their positions; Pending counts those a fleet has not chained yet.
	Records []Record
	Pending int
	// Chain is audit.Verify's report on the whole chain.
	Chain audit.Report
	// Checkpoint is the first signed checkpoint that covers every record
	// about the step, nil while none does yet (one is due within the
	// checkpoint interval). Anchored reports that the chain matches it and
	// its signature verifies (Chain.Anchored reaches it).
	Checkpoint *audit.Checkpoint
}

// Anchored reports whether a signed checkpoint the chain matches covers
// every record about the step.
func (e Evidence) Anchored() bool {
	return e.Checkpoint != nil && e.Checkpoint.Position <= e.Chain.Anchored
}

// Record is an audit record with its position in the chain (from 0, as
// audit.Break.Index counts).
type Record struct {
	Position int
	audit.Record
}

// Effect is the step's result as the system of record answered it: for a
// refund the ledger's entry.
type Effect struct {
	// Entry, Amount and Agent are the entry's id, amount in cents and the
	// agent whose token the ledger verified, when the answer has them.
	Entry  string `json:"id"`
	Amount int64  `json:"amount"`
	Agent  string `json:"agent"`
	// Result is the answer as it was recorded.
	Result json.RawMessage `json:"-"`
}

// Proven reports whether the step's records are all in the chain and the
// chain verifies through the last of them.
func (e Evidence) Proven() bool {
	if len(e.Records) == 0 || e.Pending > 0 {
		return false
	}
	return e.Chain.Broken == nil || e.Chain.Broken.Index > e.Records[len(e.Records)-1].Position
}

// Gather reads the evidence of step n of workflow wf. The workflow and its
// records are read in one read transaction; the chain's verdict in
// another (audit.Verify), over a chain that only grows in between. It
// does not check who may read it: the caller does (engine.Workflow).
func Gather(db *store.DB, wf string, n int) (Evidence, error) {
	var e Evidence
	err := db.View(func(tx *store.Tx) error {
		e = Evidence{}
		var err error
		if e.Workflow, err = tx.Workflow(wf); err != nil {
			return err
		}
		if e.Step, err = tx.Step(wf, n); err != nil {
			return err
		}
		if err := e.readDecisions(tx); err != nil {
			return err
		}
		if err := e.readApproval(tx); err != nil {
			return err
		}
		if err := e.readEffect(); err != nil {
			return err
		}
		return e.readRecords(tx)
	})
	if err != nil {
		return Evidence{}, fmt.Errorf("evidence of %s/%d: %w", wf, n, err)
	}
	if e.Chain, err = audit.Verify(db); err != nil {
		return Evidence{}, fmt.Errorf("evidence of %s/%d: %w", wf, n, err)
	}
	if len(e.Records) > 0 && e.Pending == 0 {
		cps, err := audit.Checkpoints(db, uint64(e.Records[len(e.Records)-1].Position))
		if err != nil {
			return Evidence{}, fmt.Errorf("evidence of %s/%d: %w", wf, n, err)
		}
		if len(cps) > 0 {
			e.Checkpoint = &cps[0]
		}
	}
	return e, nil
}

func (e *Evidence) readDecisions(tx *store.Tx) error {
	return tx.EachDecision(store.DecisionFilter{Workflow: e.Workflow.ID}, func(d store.Decision) error {
		if d.N == e.Step.N {
			e.Decisions++
			e.Decision = &d
		}
		return nil
	})
}

func (e *Evidence) readApproval(tx *store.Tx) error {
	if e.Step.Approval == "" {
		return nil
	}
	a, err := tx.Approval(e.Step.Approval)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil // the step names an approval no longer kept: shown without
	case err != nil:
		return err
	}
	e.Approval = &a
	return nil
}

// readEffect reads the fields an answer of a system of record has in
// common (id, amount, agent), leniently: it is another system's record,
// kept whole in Result whatever else it holds.
func (e *Evidence) readEffect() error {
	if len(e.Step.Result) == 0 {
		return nil
	}
	var eff Effect
	if err := json.Unmarshal(e.Step.Result, &eff); err != nil {
		return fmt.Errorf("the step's result: %w", err)
	}
	eff.Result = e.Step.Result
	e.Effect = &eff
	return nil
}

// readRecords walks the chain for the step's records and the pending
// records for those not chained yet. A record that does not decode is
// passed over here: Verify reports it as the break it is.
//
// Only a record whose bytes name the workflow is decoded: a stored record
// is compact JSON and a workflow id needs no escaping, so the record of a
// step holds "workflow":"<id>" as it is, and the walk skips the others
// without parsing them.
func (e *Evidence) readRecords(tx *store.Tx) error {
	pos := 0
	mark := []byte(`"workflow":"` + e.Workflow.ID + `"`)
	err := tx.EachAudit(func(_, value []byte) error {
		at := pos
		pos++
		if !bytes.Contains(value, mark) {
			return nil
		}
		r, err := audit.Decode(value)
		if err == nil && e.about(r) {
			e.Records = append(e.Records, Record{Position: at, Record: r})
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tx.EachPendingAudit(0, func(_, value []byte) error {
		if r, err := audit.Decode(value); err == nil && e.about(r) {
			e.Pending++
		}
		return nil
	})
}

func (e *Evidence) about(r audit.Record) bool {
	return r.Workflow == e.Workflow.ID && r.N == e.Step.N
}
