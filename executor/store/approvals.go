package store

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// NewApprovalID returns the next approval id: AP-1, AP-2, ...
func (t *Tx) NewApprovalID() (string, error) {
	n, err := t.nextSeq("approval_seq")
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("AP-%d", n), nil
}

// Approval returns the approval with the given id.
func (t *Tx) Approval(id string) (Approval, error) {
	var a Approval
	if err := t.getJSON(bApprovals, []byte(id), &a); err != nil {
		return Approval{}, fmt.Errorf("approval %q: %w", id, err)
	}
	return a, nil
}

// PutApproval stores a, replacing any earlier version.
func (t *Tx) PutApproval(a Approval) error {
	return t.putJSON(bApprovals, []byte(a.ID), a)
}

// Approvals returns the approvals for which keep returns true, oldest first.
func (t *Tx) Approvals(keep func(Approval) bool) ([]Approval, error) {
	var out []Approval
	err := t.bucket(bApprovals).ForEach(func(k, v []byte) error {
		var a Approval
		if err := decodeJSON(bApprovals, k, v, &a); err != nil {
			return err
		}
		if keep == nil || keep(a) {
			out = append(out, a)
		}
		return nil
	})
	// Keys sort as strings (AP-10 before AP-2); people expect creation order.
	slices.SortFunc(out, func(a, b Approval) int { return cmp.Compare(approvalNumber(a.ID), approvalNumber(b.ID)) })
	return out, err
}

func approvalNumber(id string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(id, "AP-"))
	return n
}
