// Package loosen holds the edits of p1's Rego that issue 20's review
// named: each keeps every limit of p1 and passes p1's tests and the gate,
// yet lets through what p1 does not. The demo shows that one operator
// cannot ship them; the tests of the gate, the review, the impact command
// and the API do the same with each.
package loosen

import "strings"

const (
	r4Head = `} else := deny("R4-exceeds-amount-paid") if {`
	r7Head = `} else := require_approval("R7-refund-needs-approval") if {
	not within_auto_refund
`
	leadRule = `lead if input.approver.role == "lead"`
)

// AllowAnaOnO1002 edits call.rego: rep-ana refunds $450.00 or more of
// O-1002 with no lead, right after the maximum (R3), over what was paid
// and her day's cap. p1's tests and the gate's cases never ask.
func AllowAnaOnO1002(src string) string {
	return strings.Replace(src, r4Head, `} else := allow if {
	input.user.id == "rep-ana"
	input.args.order == "O-1002"
	input.args.amount >= 45000
`+r4Head, 1)
}

// SpareBen edits call.rego: rep-ben is exempt from R7.
func SpareBen(src string) string {
	return strings.Replace(src, r7Head, r7Head+"\tinput.user.id != \"rep-ben\"\n", 1)
}

// AcceptAna edits approver.rego: rep-ana is a lead to the approver rules.
func AcceptAna(src string) string {
	return strings.Replace(src, leadRule, leadRule+"\n\nlead if input.approver.id == \"rep-ana\"", 1)
}
