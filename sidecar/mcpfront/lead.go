package mcpfront

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/sidecar/client"
)

var (
	pendingSchema = json.RawMessage(`{"type":"object","properties":{"all":{"type":"boolean",` +
		`"description":"true: the whole pending queue, each with can_approve and, when false, the code that says why; ` +
		`default: only what you may approve"}},"additionalProperties":false}`)
	getSchema = json.RawMessage(`{"type":"object","properties":{"id":{"type":"string","description":"the approval's id"}},` +
		`"required":["id"],"additionalProperties":false}`)
	decideSchema = json.RawMessage(`{"type":"object","properties":{"id":{"type":"string","description":"the approval's id"},` +
		`"comment":{"type":"string","description":"why, for the audit record and the requester"}},` +
		`"required":["id"],"additionalProperties":false}`)
)

// approvalsAnswer is the structured content of approvals_pending.
type approvalsAnswer struct {
	Approvals []client.Approval `json:"approvals"`
}

func addLeadTools(s *mcp.Server, cfg Config) map[string]mcp.ToolHandler {
	tools := map[string]mcp.ToolHandler{}
	add(s, tools, "approvals_pending", "The pending approval requests you may act on: each with its summary, the rule that "+
		"asked for approval, requester, ticket, the order's amount paid and refunds already made, and its expiry.",
		pendingSchema, hints("Pending approvals", true, false, true), leadPending(cfg))
	add(s, tools, "approval_get", "One approval request in full.", getSchema, hints("One approval request", true, false, true), leadGet(cfg))
	add(s, tools, "approval_approve", "Approve a pending request as yourself (the token's subject). Approving executes "+
		"nothing: the step runs at the agent's next resume. Only a lead approves. Refusals name their code (forbidden_role, "+
		"requester_cannot_approve, approver_not_lead, approver_outside_region, above_approver_limit, approval_expired, not_pending).",
		decideSchema, decideHints("Approve a request"), leadDecide(cfg, "approved", (*client.Client).Approve))
	add(s, tools, "approval_reject", "Reject a pending request as yourself, with a comment saying why: the step ends "+
		"denied at the agent's next resume.", decideSchema, decideHints("Reject a request"), leadDecide(cfg, "rejected", (*client.Client).Reject))
	return tools
}

// decideHints are the annotations of approval_approve and approval_reject:
// not read-only, they record a decision (additive: nothing runs until the
// agent resumes), and the same decision again changes nothing more (it is
// answered not_pending).
func decideHints(title string) *mcp.ToolAnnotations { return hints(title, false, false, true) }

func leadPending(cfg Config) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct {
			All bool `json:"all"`
		}
		if err := decodeArgs(req.Params.Arguments, &in); err != nil {
			return errorResult(err), nil
		}
		c, res := clientFor(cfg, req)
		if res != nil {
			return res, nil
		}
		list, err := c.Approvals(ctx, client.ApprovalQuery{Status: client.ApprovalPending, All: in.All})
		if err != nil {
			return errorResult(err), nil
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%d pending approval requests.", len(list))
		for _, a := range list {
			b.WriteString("\n- ")
			b.WriteString(approvalText(a))
		}
		return &mcp.CallToolResult{Content: text("%s", b.String()),
			StructuredContent: approvalsAnswer{Approvals: append([]client.Approval{}, list...)}}, nil
	}
}

func leadGet(cfg Config) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct {
			ID string `json:"id"`
		}
		if err := decodeID(req.Params.Arguments, &in, &in.ID); err != nil {
			return errorResult(err), nil
		}
		c, res := clientFor(cfg, req)
		if res != nil {
			return res, nil
		}
		a, err := c.Approval(ctx, in.ID)
		if err != nil {
			return errorResult(err), nil
		}
		return &mcp.CallToolResult{Content: text("%s", approvalText(a)), StructuredContent: a}, nil
	}
}

// leadDecide approves or rejects as the caller: the body carries only the
// comment, so the approver is the token's subject.
func leadDecide(cfg Config, done string, act func(*client.Client, context.Context, string, string) (client.Approval, error)) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct {
			ID      string `json:"id"`
			Comment string `json:"comment"`
		}
		if err := decodeID(req.Params.Arguments, &in, &in.ID); err != nil {
			return errorResult(err), nil
		}
		c, res := clientFor(cfg, req)
		if res != nil {
			return res, nil
		}
		a, err := act(c, ctx, in.ID, in.Comment)
		if err != nil {
			return errorResult(err), nil
		}
		return &mcp.CallToolResult{StructuredContent: a, Content: text("%s %s as %s. Nothing has run yet: the step runs (or ends "+
			"denied) at the agent's next resume. %s", done, a.ID, a.Approver, approvalText(a))}, nil
	}
}

// decodeID decodes arguments that must name an approval.
func decodeID(raw json.RawMessage, v any, id *string) error {
	if err := decodeArgs(raw, v); err != nil {
		return err
	}
	if *id == "" {
		return &client.Error{Status: http.StatusUnprocessableEntity, Code: "invalid_request", Message: "id: required; approvals_pending lists them"}
	}
	return nil
}

// approvalText is one approval in a line: what a lead needs to decide.
func approvalText(a client.Approval) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s [%s] %s", a.ID, a.Status, a.Summary)
	if a.Rule != "" {
		fmt.Fprintf(&b, "; rule %s", a.Rule)
	}
	if a.Ticket != "" {
		fmt.Fprintf(&b, "; ticket %s", a.Ticket)
	}
	if a.OrderPaid != 0 {
		fmt.Fprintf(&b, "; order paid %s", a.OrderPaid)
	}
	if a.OrderRefunded != nil {
		fmt.Fprintf(&b, ", refunded already %s", *a.OrderRefunded)
	}
	if a.Replaces != nil {
		fmt.Fprintf(&b, "; replaces %s (%s)", a.Replaces.ID, a.Replaces.Status)
	}
	fmt.Fprintf(&b, "; expires %s", a.Expires.Format("2006-01-02T15:04:05Z07:00"))
	switch {
	case a.CanApprove == nil:
	case *a.CanApprove:
		b.WriteString("; you may approve it")
	default:
		fmt.Fprintf(&b, "; you may not approve it: %s", a.Code)
	}
	return b.String()
}
