// Package tool is the catalog of the tools an agent may call through
// countersign and the strict normalization of their arguments.
//
// Normalization is the first control on the call path: the model contributes
// only the fields a tool's schema lists. Anything else, such as a
// model-written "approved_by", is refused here and never reaches policy.
//
// The package also defines the canonical form of a call, which two other
// places hash: the approval binding (workflow, tool, canonical args) and the
// actor token's "call" claim (tool, canonical args), which the systems of
// record recompute from their own requests.
package tool

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/countersign/countersign/executor/money"
)

// Name identifies a tool.
type Name string

// The tools of the Quillfeather support agent.
const (
	LookupOrder Name = "lookup_order"
	IssueRefund Name = "issue_refund"
	ReshipOrder Name = "reship_order"
)

// Spec describes one tool: what it is for, the scope a rep must have
// delegated for it, the system of record it reaches and whether that system
// deduplicates retries by idempotency key.
type Spec struct {
	Name        Name            `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Scope       string          `json:"-"`
	Audience    string          `json:"-"`
	Idempotent  bool            `json:"-"`
	// Effect is false for read-only tools, which need no write-ahead mark.
	Effect bool `json:"-"`
}

// Audiences of actor tokens: one per system of record.
const (
	AudienceLedger = "ledger"
	AudienceOrders = "orders"
)

const orderSchema = `"order": {"type": "string", "pattern": "^O-[0-9]{1,12}$"}`

var catalog = []Spec{
	{
		Name:        LookupOrder,
		Description: "Read an order from the order system: region, customer, amount paid, shipping status.",
		InputSchema: json.RawMessage(`{"type": "object", "additionalProperties": false, "required": ["order"], "properties": {` + orderSchema + `}}`),
		Scope:       "lookup",
		Audience:    AudienceOrders,
		Idempotent:  true,
	},
	{
		Name:        IssueRefund,
		Description: "Post a refund to the payments ledger, in integer cents, for the representative who owns the ticket.",
		InputSchema: json.RawMessage(`{"type": "object", "additionalProperties": false, "required": ["order", "amount"], "properties": {` + orderSchema + `, "amount": {"type": "integer", "minimum": 1, "maximum": 9007199254740991, "description": "cents"}}}`),
		Scope:       "refund",
		Audience:    AudienceLedger,
		Idempotent:  true,
		Effect:      true,
	},
	{
		Name:        ReshipOrder,
		Description: "Ask the order system to create a new shipment of a shipped order.",
		InputSchema: json.RawMessage(`{"type": "object", "additionalProperties": false, "required": ["order"], "properties": {` + orderSchema + `}}`),
		Scope:       "reship",
		Audience:    AudienceOrders,
		Idempotent:  false,
		Effect:      true,
	},
}

// All returns the catalog in a fixed order.
func All() []Spec { return append([]Spec(nil), catalog...) }

// Lookup returns the spec of the named tool.
func Lookup(name Name) (Spec, bool) {
	for _, s := range catalog {
		if s.Name == name {
			return s, true
		}
	}
	return Spec{}, false
}

// MustLookup is Lookup for names that came out of Normalize or the store,
// which are always in the catalog.
func MustLookup(name Name) Spec {
	s, ok := Lookup(name)
	if !ok {
		panic("tool: not in the catalog: " + string(name))
	}
	return s
}

// Args are the normalized arguments of any tool. Amount is zero for tools
// that take none.
type Args struct {
	Order  string      `json:"order"`
	Amount money.Cents `json:"amount,omitempty"`
}

// Canonical is the byte form of a call's arguments that every hash of the
// call is taken over: a JSON object with its keys sorted and no white space,
// holding exactly the fields of the tool's schema.
func Canonical(name Name, a Args) []byte {
	m := map[string]any{"order": a.Order}
	if name == IssueRefund {
		m["amount"] = int64(a.Amount)
	}
	b, _ := json.Marshal(m) // map keys marshal sorted; string and int64 cannot fail
	return b
}

// CallHash binds a token to one call: hex(sha256(tool "\n" canonical args)).
// A system of record recomputes it from the request it receives.
func CallHash(name Name, a Args) string {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{'\n'})
	h.Write(Canonical(name, a))
	return hex.EncodeToString(h.Sum(nil))
}
