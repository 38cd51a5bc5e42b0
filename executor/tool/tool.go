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
	Annotations Annotations     `json:"annotations"`
	Scope       string          `json:"-"`
	Audience    string          `json:"-"`
	// Idempotent: the system of record deduplicates retries by
	// idempotency key (the ledger does, the order system does not). Not
	// Annotations.Idempotent, which the workflow makes true of every tool.
	Idempotent bool `json:"-"`
	// Effect is false for read-only tools, which need no write-ahead mark.
	Effect bool `json:"-"`
}

// Annotations are what an agent's host may know of a tool before calling
// it, as MCP's tool annotations say it (the MCP front serves them as
// such): hints for a host deciding whether to ask its user first, never a
// control. Every tool reaches only the company's own systems of record,
// so none is open-world.
type Annotations struct {
	// Title names the tool for a person.
	Title string `json:"title"`
	// ReadOnly: the tool changes nothing.
	ReadOnly bool `json:"read_only"`
	// Destructive: the tool's effect cannot be taken back by calling it
	// again (money paid out, a parcel sent).
	Destructive bool `json:"destructive"`
	// Idempotent: the same call again has no further effect. True of
	// every tool within a workflow, which answers a repeat of a call that
	// ran as suppressed, whatever the system of record does with retries.
	Idempotent bool `json:"idempotent"`
	// OpenWorld: the tool reaches entities outside a closed domain.
	OpenWorld bool `json:"open_world"`
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
		Description: "Read an order from the order system: region, customer, amount paid, shipping status and its lines (id, sku, description, unit amount, quantity, quantity already refunded).",
		InputSchema: json.RawMessage(`{"type": "object", "additionalProperties": false, "required": ["order"], "properties": {` + orderSchema + `}}`),
		Annotations: Annotations{Title: "Look up an order", ReadOnly: true, Idempotent: true},
		Scope:       "lookup",
		Audience:    AudienceOrders,
		Idempotent:  true,
	},
	{
		Name:        IssueRefund,
		Description: "Post a refund to the payments ledger for the representative who owns the ticket: either an amount in integer cents on the order, or a line of the order and a quantity, whose amount the order record sets (an amount sent beside them must equal it).",
		InputSchema: json.RawMessage(`{"type": "object", "additionalProperties": false, "properties": {` + orderSchema +
			`, "amount": {"type": "integer", "minimum": 1, "maximum": 9007199254740991, "description": "cents"}` +
			`, "line": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,64}$", "description": "a line id of the order (lookup_order shows them)"}` +
			`, "quantity": {"type": "integer", "minimum": 1, "maximum": 1000000, "description": "units of the line"}}` +
			// Either an amount, or a line with its quantity (an amount
			// beside them optional). Said without a combinator at the top
			// (oneOf, anyOf, allOf), which Anthropic's API refuses in a
			// tool's input schema, failing every request that lists it.
			`, "required": ["order"], "dependentRequired": {"line": ["quantity"], "quantity": ["line"]}` +
			`, "if": {"required": ["line"]}, "else": {"required": ["amount"]}}`),
		Annotations: Annotations{Title: "Refund an order", Destructive: true, Idempotent: true},
		Scope:       "refund",
		Audience:    AudienceLedger,
		Idempotent:  true,
		Effect:      true,
	},
	{
		Name:        ReshipOrder,
		Description: "Ask the order system to create a new shipment of a shipped order.",
		InputSchema: json.RawMessage(`{"type": "object", "additionalProperties": false, "required": ["order"], "properties": {` + orderSchema + `}}`),
		Annotations: Annotations{Title: "Reship an order", Destructive: true, Idempotent: true},
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
// that take none. Line and Quantity name a line-item refund: its amount is
// the order record's (unit amount times quantity), filled in by the engine
// from the record, never the agent's; they are empty for every other call.
type Args struct {
	Order    string      `json:"order"`
	Amount   money.Cents `json:"amount,omitempty"`
	Line     string      `json:"line,omitempty"`
	Quantity int64       `json:"quantity,omitempty"`
}

// IsLine reports whether a names a line-item refund.
func (a Args) IsLine() bool { return a.Line != "" }

// Canonical is the byte form of a call's arguments that every hash of the
// call is taken over: a JSON object with its keys sorted and no white space,
// holding exactly the fields of the tool's schema. A refund by amount keeps
// the form it always had, {"amount","order"}; a line-item refund adds its
// line and quantity, so the amount the record set and the line it was set
// from are bound together; a line the record could not price (no such
// line) has no amount.
func Canonical(name Name, a Args) []byte {
	m := map[string]any{"order": a.Order}
	if name == IssueRefund {
		m["amount"] = int64(a.Amount)
		if a.IsLine() {
			m["line"], m["quantity"] = a.Line, a.Quantity
			if a.Amount == 0 { // not priced: the line is not on the order
				delete(m, "amount")
			}
		}
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
