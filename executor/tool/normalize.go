package tool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/strictjson"
)

// ErrUnknownTool is returned for a tool name outside the catalog.
var ErrUnknownTool = errors.New("unknown tool")

// SchemaError says which field of a call's arguments broke the tool's schema
// and how. Callers answer it with 422.
type SchemaError struct {
	Field   string
	Problem string
}

func (e *SchemaError) Error() string {
	if e.Field == "" {
		return "args: " + e.Problem
	}
	return fmt.Sprintf("args.%s: %s", e.Field, e.Problem)
}

var orderID = regexp.MustCompile(`^O-[0-9]{1,12}$`)

// Normalize decodes raw strictly against the tool's schema: a single JSON
// object read by strictjson (no duplicate or case-variant names at any
// depth, no trailing data: those errors wrap strictjson.ErrMalformed), no
// unknown fields, an order id matching
// ^O-[0-9]{1,12}$, and for refunds either a positive integer amount of
// cents or a line id with a positive quantity (and optionally the amount
// the agent expects, which the engine compares with the record's).
func Normalize(name Name, raw json.RawMessage) (Args, error) {
	a, extra, err := decode(name, raw)
	if err != nil {
		return Args{}, err
	}
	for k := range extra {
		return Args{}, &SchemaError{Field: k, Problem: "unknown field; only the fields of the tool's input_schema are accepted"}
	}
	return a, nil
}

// Lenient decodes like Normalize but keeps unknown fields instead of
// refusing them. It exists only so the engine's strict_schema control can be
// removed in tests; nothing reachable from configuration calls it.
func Lenient(name Name, raw json.RawMessage) (Args, map[string]json.RawMessage, error) {
	return decode(name, raw)
}

func decode(name Name, raw json.RawMessage) (Args, map[string]json.RawMessage, error) {
	if _, ok := Lookup(name); !ok {
		return Args{}, nil, fmt.Errorf("%w %q: use one of lookup_order, issue_refund, reship_order", ErrUnknownTool, name)
	}
	fields, err := objectFields(raw)
	if err != nil {
		return Args{}, nil, err
	}
	// Take every schema field before judging any, so a case-variant name
	// is refused as malformed whatever else is wrong.
	var f refundFields
	if f.order, err = take(fields, "order"); err != nil {
		return Args{}, nil, err
	}
	if name == IssueRefund {
		for _, m := range []struct {
			name string
			dst  *json.RawMessage
		}{{"amount", &f.amount}, {"line", &f.line}, {"quantity", &f.quantity}} {
			if *m.dst, err = take(fields, m.name); err != nil {
				return Args{}, nil, err
			}
		}
	}
	a, err := validate(name, f)
	return a, fields, err
}

// refundFields are the raw schema fields of a call; nil is an absent field.
type refundFields struct {
	order, amount, line, quantity json.RawMessage
}

// validate judges the schema fields' values.
func validate(name Name, f refundFields) (Args, error) {
	var a Args
	if f.order == nil {
		return Args{}, &SchemaError{Field: "order", Problem: "required"}
	}
	if err := json.Unmarshal(f.order, &a.Order); err != nil || f.order[0] != '"' {
		return Args{}, &SchemaError{Field: "order", Problem: "must be a string"}
	}
	if !orderID.MatchString(a.Order) {
		return Args{}, &SchemaError{Field: "order", Problem: "must match ^O-[0-9]{1,12}$"}
	}
	if name != IssueRefund {
		return a, nil
	}
	var err error
	if f.line == nil && f.quantity == nil {
		if f.amount == nil {
			return Args{}, &SchemaError{Field: "amount", Problem: `required (integer cents), or name a line of the order with "line" and "quantity"`}
		}
		a.Amount, err = positiveCents(f.amount)
		return a, err
	}
	if f.line == nil {
		return Args{}, &SchemaError{Field: "line", Problem: "required with quantity: the id of a line of the order"}
	}
	if err := json.Unmarshal(f.line, &a.Line); err != nil || f.line[0] != '"' || !lineID.MatchString(a.Line) {
		return Args{}, &SchemaError{Field: "line", Problem: "must be a line id of the order matching ^[A-Za-z0-9._-]{1,64}$"}
	}
	if f.quantity == nil {
		return Args{}, &SchemaError{Field: "quantity", Problem: "required with line: how many units of the line to refund"}
	}
	if a.Quantity, err = positiveInt(f.quantity, "quantity", MaxQuantity, "a positive whole number of units, at most 1000000"); err != nil {
		return Args{}, err
	}
	if f.amount != nil {
		// Optional: the record sets the amount; one sent must match it,
		// which the engine checks once it has read the record.
		if a.Amount, err = positiveCents(f.amount); err != nil {
			return Args{}, err
		}
	}
	return a, nil
}

// lineID is a line id of an order.
var lineID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// MaxQuantity is the largest quantity of a line-item refund.
const MaxQuantity = 1_000_000

// MaxAmount is the largest amount accepted: 2^53-1 cents, the largest
// integer every JSON reader (JavaScript's included) holds exactly, so no
// consumer of the records can read a different amount than was decided.
const MaxAmount = 1<<53 - 1

// positiveCents accepts only a JSON integer literal: no fraction, no
// exponent, no string, no sign, greater than zero and at most MaxAmount.
func positiveCents(raw json.RawMessage) (money.Cents, error) {
	n, err := positiveInt(raw, "amount", MaxAmount, "a positive integer number of cents, at most 2^53-1 (3000 is $30.00)")
	return money.Cents(n), err
}

// positiveInt accepts only a JSON integer literal between 1 and limit.
func positiveInt(raw json.RawMessage, field string, limit int64, must string) (int64, error) {
	bad := &SchemaError{Field: field, Problem: "must be " + must}
	if len(raw) == 0 || raw[0] < '0' || raw[0] > '9' {
		return 0, bad
	}
	for _, c := range raw {
		if c < '0' || c > '9' {
			return 0, bad
		}
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n <= 0 || n > limit {
		return 0, bad
	}
	return n, nil
}

// objectFields splits raw into its members with the strict decoder: missing
// args and another JSON type are schema errors (422); a body another reader
// could read differently (duplicate or case-variant names, trailing data) is
// strictjson's ErrMalformed, answered 400.
func objectFields(raw json.RawMessage) (strictjson.Members, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, &SchemaError{Problem: "required: a JSON object"}
	}
	fields, err := strictjson.Object(raw)
	if errors.Is(err, strictjson.ErrType) {
		return nil, &SchemaError{Problem: "must be a JSON object"}
	}
	if err != nil {
		return nil, fmt.Errorf("args: %w", err)
	}
	return fields, nil
}

// take removes a field of the tool's schema from fields (nil: absent); a
// case variant of its name is malformed, not an unknown field.
func take(fields strictjson.Members, name string) (json.RawMessage, error) {
	v, _, err := fields.Take(name)
	if err != nil {
		return nil, fmt.Errorf("args: %w", err)
	}
	return v, nil
}
