package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"

	"github.com/countersign/countersign/executor/money"
)

// Per-evaluation options that only save work: no metrics are read, and
// early exit has nothing to cut short in documents that are single rules or
// else-chains, while its bookkeeping costs allocations on every call.
var (
	noMetrics   = rego.EvalMetrics(metrics.NoOp())
	noEarlyExit = rego.EvalEarlyExit(false)
)

// eval runs one prepared query under a deadline: a bundle that loops on
// some input is stopped (OPA checks for cancellation in every expression
// and inside numbers.range) and the caller gets ErrTimeout, never a result.
func (b *Bundle) eval(ctx context.Context, pq rego.PreparedEvalQuery, input ast.Value, now time.Time, timeout time.Duration) (rego.ResultSet, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rs, err := pq.Eval(ctx, rego.EvalParsedInput(input), rego.EvalTime(now), noMetrics, noEarlyExit)
	if err == nil {
		return rs, nil
	}
	// Stopped inside numbers.range, the error is OPA's cancel error, which
	// does not wrap context.DeadlineExceeded: ask the context why.
	if (topdown.IsCancel(err) || errors.Is(err, context.DeadlineExceeded)) && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil, fmt.Errorf("%w: revision %s did not answer within %v", ErrTimeout, b.revision, timeout)
	}
	return nil, fmt.Errorf("policy: evaluate %s: %w", b.revision, err)
}

// decide evaluates the call policy. The input is built as an ast.Value by
// hand: EvalInput would round-trip a Go value through JSON on every call.
func (b *Bundle) decide(ctx context.Context, in Input, now time.Time, timeout time.Duration) (Result, error) {
	return b.decideValue(ctx, callInput(in), now, timeout)
}

// decideValue evaluates the call policy on input as the policy sees it.
func (b *Bundle) decideValue(ctx context.Context, input ast.Value, now time.Time, timeout time.Duration) (Result, error) {
	rs, err := b.eval(ctx, b.call, input, now, timeout)
	if err != nil {
		return Result{}, err
	}
	obj, err := single(rs, callQuery, b.revision)
	if err != nil {
		return Result{}, err
	}
	d, okD := obj["decision"].(string)
	rule, okR := obj["rule"].(string)
	if len(obj) != 2 || !okD || !okR || rule == "" || !Decision(d).valid() {
		return Result{}, fmt.Errorf("%w: %s in revision %s returned %v", ErrUnexpectedResult, callQuery, b.revision, obj)
	}
	return Result{Decision: Decision(d), Rule: rule, Revision: b.revision}, nil
}

// checkApprover evaluates the approver policy; "" means allowed.
func (b *Bundle) checkApprover(ctx context.Context, in ApproverInput, now time.Time, timeout time.Duration) (Refusal, error) {
	rs, err := b.eval(ctx, b.approver, approverInput(in), now, timeout)
	if err != nil {
		return "", err
	}
	obj, err := single(rs, approverQuery, b.revision)
	if err != nil {
		return "", err
	}
	allowed, ok := obj["allowed"].(bool)
	switch {
	case ok && allowed && len(obj) == 1:
		return "", nil
	case ok && !allowed && len(obj) == 2:
		if code, _ := obj["code"].(string); Refusal(code).valid() {
			return Refusal(code), nil
		}
	}
	return "", fmt.Errorf("%w: %s in revision %s returned %v", ErrUnexpectedResult, approverQuery, b.revision, obj)
}

// single unwraps the one object a query must produce; undefined, several
// results or anything but an object is an unexpected result.
func single(rs rego.ResultSet, query, revision string) (map[string]any, error) {
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return nil, fmt.Errorf("%w: %s in revision %s is undefined or ambiguous (%d results)", ErrUnexpectedResult, query, revision, len(rs))
	}
	obj, ok := rs[0].Expressions[0].Value.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: %s in revision %s returned %T, not an object", ErrUnexpectedResult, query, revision, rs[0].Expressions[0].Value)
	}
	return obj, nil
}

func callInput(in Input) ast.Value {
	user := ast.NullTerm()
	if u := in.User; u != nil {
		scopes := make([]*ast.Term, len(u.Scopes))
		for i, s := range u.Scopes {
			scopes[i] = str(s)
		}
		user = ast.ObjectTerm(
			field("id", str(u.ID)),
			field("role", str(u.Role)),
			field("region", str(u.Region)),
			field("scopes", ast.ArrayTerm(scopes...)),
			field("refund_ceiling", cents(u.RefundCeiling)),
		)
	}
	order := ast.NullTerm()
	if o := in.Order; o != nil {
		lines := make([]*ast.Term, len(o.Lines))
		for i, l := range o.Lines {
			lines[i] = ast.ObjectTerm(
				field("id", str(l.ID)),
				field("sku", str(l.SKU)),
				field("description", str(l.Description)),
				field("unit_amount", cents(l.UnitAmount)),
				field("quantity", ast.IntNumberTerm(int(l.Quantity))),
				field("refunded_quantity", ast.IntNumberTerm(int(l.RefundedQuantity))),
			)
		}
		orderFields := [][2]*ast.Term{
			field("id", str(o.ID)),
			field("region", str(o.Region)),
			field("customer", str(o.Customer)),
			field("paid", cents(o.Paid)),
			field("status", str(o.Status)),
			field("lines", ast.ArrayTerm(lines...)),
		}
		for _, d := range []struct {
			key string
			at  time.Time
		}{{"placed_at", o.PlacedAt}, {"shipped_at", o.ShippedAt}} {
			if !d.at.IsZero() {
				orderFields = append(orderFields, field(d.key, str(RFC3339(d.at))))
			}
		}
		order = ast.ObjectTerm(orderFields...)
	}
	argFields := [][2]*ast.Term{field("order", str(in.Args.Order)), field("amount", cents(in.Args.Amount))}
	if in.Args.IsLine() {
		// Only a line-item refund has these members: an amount refund's
		// input is what it always was.
		argFields = append(argFields, field("line", str(in.Args.Line)), field("quantity", ast.IntNumberTerm(int(in.Args.Quantity))))
	}
	fields := [][2]*ast.Term{
		field("user", user),
		field("tool", str(string(in.Tool))),
		field("args", ast.ObjectTerm(argFields...)),
		field("order", order),
		field("totals", ast.ObjectTerm(
			field("order_refunded", cents(in.Totals.OrderRefunded)),
			field("rep_day", cents(in.Totals.RepDay)),
			field("agent_hour", cents(in.Totals.AgentHour)),
			field("order_reships", ast.IntNumberTerm(in.Totals.OrderReships)),
		)),
	}
	if !in.Now.IsZero() {
		fields = append(fields, field("now", ast.ObjectTerm(
			field("rfc3339", str(RFC3339(in.Now))),
			field("ns", ast.IntNumberTerm(int(in.Now.UnixNano()))),
		)))
	}
	if r := in.Workflow; r != nil {
		fields = append(fields, field("workflow", ast.ObjectTerm(
			field("step", ast.IntNumberTerm(r.Step)),
			field("max_steps", ast.IntNumberTerm(r.MaxSteps)),
			field("spent", cents(r.Spent)),
			field("max_spend", cents(r.MaxSpend)),
			field("past_deadline", ast.BooleanTerm(r.PastDeadline)),
			field("attempt", ast.IntNumberTerm(r.Attempt)),
			field("max_attempts", ast.IntNumberTerm(r.MaxAttempts)),
		)))
	}
	return ast.NewObject(fields...)
}

func approverInput(in ApproverInput) ast.Value {
	return ast.NewObject(
		field("approver", ast.ObjectTerm(
			field("id", str(in.Approver.ID)),
			field("role", str(in.Approver.Role)),
			field("region", str(in.Approver.Region)),
			field("approve_limit", cents(in.Approver.ApproveLimit)),
		)),
		field("requester", ast.ObjectTerm(
			field("id", str(in.Requester.ID)),
			field("region", str(in.Requester.Region)),
		)),
		field("tool", str(string(in.Tool))),
		field("amount", cents(in.Amount)),
		field("expires", seconds(in.Expires)),
		field("now", seconds(in.Now)),
	)
}

func field(key string, v *ast.Term) [2]*ast.Term { return [2]*ast.Term{ast.StringTerm(key), v} }

func str(s string) *ast.Term { return ast.StringTerm(s) }

func cents(c money.Cents) *ast.Term { return ast.IntNumberTerm(int(c)) }

func seconds(t time.Time) *ast.Term { return ast.IntNumberTerm(int(t.Unix())) }

// RFC3339 is how the policy input writes a time: RFC 3339 in UTC, with
// the fraction of a second when there is one (time.parse_rfc3339_ns reads
// it back to the nanosecond).
func RFC3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// InputJSON is in as the call policy sees it, as JSON (members sorted):
// what a reviewer is shown of a generated input.
func InputJSON(in Input) (json.RawMessage, error) { return valueJSON(callInput(in)) }

// ApproverInputJSON is in as the approver policy sees it, as JSON.
func ApproverInputJSON(in ApproverInput) (json.RawMessage, error) {
	return valueJSON(approverInput(in))
}

func valueJSON(v ast.Value) (json.RawMessage, error) {
	x, err := ast.JSON(v)
	if err != nil {
		return nil, fmt.Errorf("policy: input as JSON: %w", err)
	}
	return json.Marshal(x)
}
