package credential

import (
	"time"

	"github.com/countersign/countersign/executor/money"
)

// Claims are what the engine asks to be minted for one dispatch attempt.
// The Authority adds iss, jti, iat, exp, epoch and the kid.
type Claims struct {
	Subject  string      // the rep whose authority is used (sub)
	Agent    string      // the agent acting for them (act.sub, RFC 8693)
	Audience string      // the one system of record: "ledger" or "orders"
	Scope    string      // the one operation: "refund", "reship", "lookup", "reverse"
	Max      money.Cents // the rep's refund ceiling, enforced by the ledger
	Call     string      // tool.CallHash of the exact call (or the reversal's binding)
	// Key is the Idempotency-Key of the one ledger write the token is for
	// (claim key, omitted when empty): the ledger refuses the token with
	// any other key, so a captured refund token cannot make a new entry.
	Key string
	// Reference is the reference of the one reshipment the token is for
	// (claim ref, omitted when empty); the order system stores it with
	// the shipment.
	Reference string
	// Line and Quantity name the one line-item refund the token is for
	// (claims line and quantity, omitted when empty): the ledger checks
	// them against its request and, through the order system, against
	// the order's line.
	Line     string
	Quantity int64
	// NotAfter, when set, bounds the token's exp (rounded down to the
	// second): the engine passes the step's token deadline, the time
	// before which every token minted for the step has expired, so that a
	// step whose effect is not found after it is known to be absent.
	NotAfter time.Time
}
