package client

import (
	"context"
	"net/http"
	"net/url"
)

// Approvals lists approval requests with q.Status (every status when
// empty). For a lead the API lists by default only what this lead may
// approve; q.All asks for the whole queue, each item with CanApprove and,
// when false, the Code that says why.
func (c *Client) Approvals(ctx context.Context, q ApprovalQuery) ([]Approval, error) {
	v := url.Values{}
	if q.Status != "" {
		v.Set("status", string(q.Status))
	}
	if q.All {
		v.Set("all", "true")
	}
	if q.Approver != "" {
		v.Set("approver", q.Approver)
	}
	if q.Requester != "" {
		v.Set("requester", q.Requester)
	}
	var out ApprovalList
	err := c.call(ctx, http.MethodGet, "/v1/approvals", v, nil, &out)
	return out.Approvals, err
}

// Approval reads one approval request.
func (c *Client) Approval(ctx context.Context, id string) (Approval, error) {
	var a Approval
	err := c.call(ctx, http.MethodGet, "/v1/approvals/"+seg(id), nil, nil, &a)
	return a, err
}

// Approve approves a pending request as the token's subject, with an
// optional comment. A 403 refuses it: forbidden_role for anyone but a lead
// and requester_cannot_approve for the requester (the floor no bundle
// widens), then the approver rules' approver_not_lead,
// approver_outside_region, above_approver_limit, approval_expired; a
// request no longer pending is a 409 not_pending. Approving executes nothing: the step runs at the
// workflow's next resume.
func (c *Client) Approve(ctx context.Context, id, comment string) (Approval, error) {
	return c.decide(ctx, id, "approve", comment)
}

// Reject rejects a pending request as the token's subject, with an
// optional comment: the step ends denied at the workflow's next resume.
func (c *Client) Reject(ctx context.Context, id, comment string) (Approval, error) {
	return c.decide(ctx, id, "reject", comment)
}

func (c *Client) decide(ctx context.Context, id, verb, comment string) (Approval, error) {
	var body any // no body without a comment, as the API allows
	if comment != "" {
		body = struct {
			Comment string `json:"comment"`
		}{comment}
	}
	var a Approval
	err := c.call(ctx, http.MethodPost, "/v1/approvals/"+seg(id)+"/"+verb, nil, body, &a)
	return a, err
}
