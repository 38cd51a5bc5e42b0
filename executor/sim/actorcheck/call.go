package actorcheck

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
)

// Tools whose calls the systems of record bind tokens to.
const (
	ToolIssueRefund   = "issue_refund"
	ToolLookupOrder   = "lookup_order"
	ToolReshipOrder   = "reship_order"
	ToolReverseRefund = "reverse_refund"
)

// CallHash is the binding formula: hex(sha256(tool "\n" canonicalArgs)),
// where canonicalArgs is a JSON object with sorted keys and no white space.
func CallHash(tool string, canonicalArgs []byte) string {
	h := sha256.New()
	h.Write([]byte(tool))
	h.Write([]byte{'\n'})
	h.Write(canonicalArgs)
	return hex.EncodeToString(h.Sum(nil))
}

// RefundCall is the binding of issue_refund {"amount":amount,"order":order}.
func RefundCall(order string, amount int64) string {
	b := make([]byte, 0, 48)
	b = append(b, `{"amount":`...)
	b = strconv.AppendInt(b, amount, 10)
	b = append(b, `,"order":`...)
	b = appendString(b, order)
	b = append(b, '}')
	return CallHash(ToolIssueRefund, b)
}

// LineRefundCall is the binding of a line-item refund, issue_refund
// {"amount":amount,"line":line,"order":order,"quantity":quantity}.
func LineRefundCall(order, line string, quantity, amount int64) string {
	b := make([]byte, 0, 80)
	b = append(b, `{"amount":`...)
	b = strconv.AppendInt(b, amount, 10)
	b = append(b, `,"line":`...)
	b = appendString(b, line)
	b = append(b, `,"order":`...)
	b = appendString(b, order)
	b = append(b, `,"quantity":`...)
	b = strconv.AppendInt(b, quantity, 10)
	b = append(b, '}')
	return CallHash(ToolIssueRefund, b)
}

// OrderCall is the binding of a call whose only argument is the order:
// lookup_order or reship_order {"order":order}.
func OrderCall(tool, order string) string {
	b := append([]byte(`{"order":`), appendString(nil, order)...)
	return CallHash(tool, append(b, '}'))
}

// ReversalCall is the binding of reverse_refund {"entry":entry}.
func ReversalCall(entry string) string {
	b := append([]byte(`{"entry":`), appendString(nil, entry)...)
	return CallHash(ToolReverseRefund, append(b, '}'))
}

// appendString appends s as a JSON string with encoding/json's escaping, the
// escaping the minting side's canonical form uses as well.
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}
