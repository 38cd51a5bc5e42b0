package tool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"

	"github.com/countersign/countersign/executor/money"
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
// object, no duplicate keys, no unknown fields, an order id matching
// ^O-[0-9]{1,12}$, and for refunds a positive integer amount of cents.
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
	var a Args
	orderRaw, ok := fields["order"]
	if !ok {
		return Args{}, nil, &SchemaError{Field: "order", Problem: "required"}
	}
	delete(fields, "order")
	if err := json.Unmarshal(orderRaw, &a.Order); err != nil || orderRaw[0] != '"' {
		return Args{}, nil, &SchemaError{Field: "order", Problem: "must be a string"}
	}
	if !orderID.MatchString(a.Order) {
		return Args{}, nil, &SchemaError{Field: "order", Problem: "must match ^O-[0-9]{1,12}$"}
	}
	if name == IssueRefund {
		amountRaw, ok := fields["amount"]
		if !ok {
			return Args{}, nil, &SchemaError{Field: "amount", Problem: "required (integer cents)"}
		}
		delete(fields, "amount")
		c, err := positiveCents(amountRaw)
		if err != nil {
			return Args{}, nil, err
		}
		a.Amount = c
	}
	return a, fields, nil
}

// MaxAmount is the largest amount accepted: 2^53-1 cents, the largest
// integer every JSON reader (JavaScript's included) holds exactly, so no
// consumer of the records can read a different amount than was decided.
const MaxAmount = 1<<53 - 1

// positiveCents accepts only a JSON integer literal: no fraction, no
// exponent, no string, no sign, greater than zero and within int64.
func positiveCents(raw json.RawMessage) (money.Cents, error) {
	bad := &SchemaError{Field: "amount", Problem: "must be a positive integer number of cents, at most 2^53-1 (3000 is $30.00)"}
	if len(raw) == 0 || raw[0] < '0' || raw[0] > '9' {
		return 0, bad
	}
	for _, c := range raw {
		if c < '0' || c > '9' {
			return 0, bad
		}
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n <= 0 || n > MaxAmount {
		return 0, bad
	}
	return money.Cents(n), nil
}

// objectFields splits one JSON object into its members, refusing anything
// else: another JSON type, duplicate keys (which decoders resolve
// differently), or trailing data.
func objectFields(raw json.RawMessage) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, &SchemaError{Problem: "must be a JSON object"}
	}
	fields := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, &SchemaError{Problem: "malformed object"}
		}
		key := tok.(string) // inside an object the decoder only yields string keys here
		if _, dup := fields[key]; dup {
			return nil, &SchemaError{Field: key, Problem: "duplicate key"}
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, &SchemaError{Field: key, Problem: "malformed value"}
		}
		fields[key] = bytes.TrimSpace(v)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, &SchemaError{Problem: "malformed object"}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &SchemaError{Problem: "trailing data after the object"}
	}
	return fields, nil
}
