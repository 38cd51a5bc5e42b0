package client

import (
	"fmt"
	"net/http"

	"github.com/countersign/countersign/executor/money"
)

// Error is an answer of the API outside 2xx: its status and the error
// object of its body. Code is one of the API's stable codes (policy_denied,
// not_pending, above_approver_limit, invalid_args, unauthenticated, ...),
// and is empty only when the body was not the API's error shape (a proxy's
// page, say); Message then holds the start of that body.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// Rule is the policy rule that decided, when one did.
	Rule string `json:"rule,omitempty"`
	// RequestID is the id the sidecar's log line carries too; quote it when
	// reporting a 5xx.
	RequestID string `json:"-"`
	// Failures are the cases a bundle failed, on a 422 gate_failed (an
	// upload, an approval or a rollback of a bundle): the body's
	// "failures", beside its error.
	Failures []GateFailure `json:"-"`
}

// ErrorBody is the body of every answer outside 2xx: the error and the
// request id its log line carries too.
type ErrorBody struct {
	Error     *Error `json:"error"`
	RequestID string `json:"request_id"`
}

// GateFailedBody is the body of a 422 gate_failed: the error and, beside
// it, the cases the bundle failed.
type GateFailedBody struct {
	ErrorBody
	Failures []GateFailure `json:"failures"`
}

// GateFailure is one case a rejected bundle failed. An undeclared limit
// change and a failing Rego test have no amount and no rules. A case that
// pins the rule as well as the decision may fail on the rule alone
// (Expected == Got): ExpectedRule and GotRule then say how.
type GateFailure struct {
	Case         string       `json:"case"`
	Amount       *money.Cents `json:"amount,omitempty"`
	Expected     string       `json:"expected"`
	Got          string       `json:"got"`
	ExpectedRule string       `json:"expected_rule,omitempty"`
	GotRule      string       `json:"got_rule,omitempty"`
}

func (e *Error) Error() string {
	code := e.Code
	if code == "" {
		code = http.StatusText(e.Status)
	}
	s := fmt.Sprintf("countersign: %d %s: %s", e.Status, code, e.Message)
	if e.Rule != "" {
		s += " (rule " + e.Rule + ")"
	}
	return s
}
