package engine

import (
	"errors"
	"fmt"

	"github.com/countersign/countersign/executor/money"
)

// Errors callers branch on. The HTTP layer maps each to a status and code.
var (
	// ErrNotFound: no such workflow, step or approval.
	ErrNotFound = errors.New("not found")
	// ErrForbidden: the caller may not act on this record.
	ErrForbidden = errors.New("forbidden")
	// ErrWorkflowExists: the workflow id is taken, by another user, another
	// ticket, or the same ticket opened with another agent_version or other
	// bounds.
	ErrWorkflowExists = errors.New("workflow id is taken")
	// ErrNotAmendable: the step has started or ended; its call is final.
	ErrNotAmendable = errors.New("step is not amendable")
	// ErrNotPending: the approval was already decided, used, expired or voided.
	ErrNotPending = errors.New("approval is not pending")
	// ErrUnavailable: a system of record could not be reached and nothing
	// happened; the step stays pending and can be resumed.
	ErrUnavailable = errors.New("system of record unavailable")
	// ErrCrashed is returned by a failpoint hook to stop a step where a crash
	// would, leaving the store exactly as the crash would.
	ErrCrashed = errors.New("crashed at failpoint")
)

// notFound is the one error for a record that is absent, or that the
// caller may not know of: the two read the same, word for word.
func notFound(kind, id string) error {
	return fmt.Errorf("%s %q: %w", kind, id, ErrNotFound)
}

// AmountMismatch is a line-item refund whose amount, sent by the agent
// beside the line and quantity, differs from the amount the order record
// sets (the line's unit amount times the quantity). Nothing is recorded;
// callers answer it 422 amount_mismatch. It matches ErrAmountMismatch.
type AmountMismatch struct {
	Order, Line  string
	Quantity     int64
	Sent, Priced money.Cents
}

// ErrAmountMismatch is what errors.Is finds in an *AmountMismatch.
var ErrAmountMismatch = errors.New("amount_mismatch")

func (e *AmountMismatch) Error() string {
	return fmt.Sprintf("%d of line %s of order %s cost %s by the order record, not the %s sent; leave the amount out, or name the line the amount belongs to",
		e.Quantity, e.Line, e.Order, e.Priced, e.Sent)
}

// Is makes errors.Is(err, ErrAmountMismatch) hold.
func (e *AmountMismatch) Is(target error) bool { return target == ErrAmountMismatch }

// ApprovalRefused is a lead's approval (or rejection) that the approver
// rules refused; Code is the rule's code, e.g. "above_approver_limit".
type ApprovalRefused struct {
	Code string
}

func (e *ApprovalRefused) Error() string {
	return fmt.Sprintf("approval refused: %s", e.Code)
}
