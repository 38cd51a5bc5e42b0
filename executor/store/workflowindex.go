package store

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// The workflow indexes list workflows in the order they were created
// without reading every workflow: each workflow gets a creation number
// when it is created, and two indexes point at it by that number.
//
//	workflows_by_seq:  creation number (8 big-endian bytes) → workflow id
//	workflows_by_user: user, NUL, creation number → workflow id
//
// A workflow's user and creation never change, so its keys are written once,
// by CreateWorkflow, and PutWorkflow on the step path costs nothing more.
var (
	bWorkflowsBySeq  = []byte("workflows_by_seq")
	bWorkflowsByUser = []byte("workflows_by_user")
)

// userPrefix is the key prefix of user's workflows in workflows_by_user.
func userPrefix(user string) []byte { return append([]byte(user), 0) }

// indexWorkflow gives the new workflow w the next creation number.
func (t *Tx) indexWorkflow(w Workflow) error {
	seq, err := t.bucket(bWorkflowsBySeq).NextSequence()
	if err != nil {
		return fmt.Errorf("index workflow %q: %w", w.ID, err)
	}
	if err := t.bucket(bWorkflowsBySeq).Put(u64(seq), []byte(w.ID)); err != nil {
		return fmt.Errorf("index workflow %q: %w", w.ID, err)
	}
	if err := t.bucket(bWorkflowsByUser).Put(append(userPrefix(w.User), u64(seq)...), []byte(w.ID)); err != nil {
		return fmt.Errorf("index workflow %q: %w", w.ID, err)
	}
	return nil
}

// indexWorkflows builds the workflow indexes of a store written before
// they existed from its workflows, numbered in the order they were created
// (by id among those created at the same time). Open runs it once.
func (t *Tx) indexWorkflows() error {
	all, err := t.Workflows(nil)
	if err != nil {
		return fmt.Errorf("build the workflow index: %w", err)
	}
	slices.SortStableFunc(all, func(a, b Workflow) int {
		return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.ID, b.ID))
	})
	for _, w := range all {
		if err := t.indexWorkflow(w); err != nil {
			return fmt.Errorf("build the workflow index: %w", err)
		}
	}
	return nil
}

// WorkflowFilter selects workflows. The zero value selects them all.
type WorkflowFilter struct {
	// User, when set, selects that user's workflows only, read along
	// their index: the other users' workflows are never read.
	User string
	// Status, when set, selects the workflows in that status.
	Status WorkflowStatus
	// After skips every workflow created up to and including this
	// creation number: a WorkflowPage's Next, to read the page after it.
	After uint64
}

// WorkflowPage is one page of workflows, oldest first.
type WorkflowPage struct {
	Workflows []Workflow
	// Next is the creation number of the page's last workflow when more
	// may follow (the next page's WorkflowFilter.After), 0 when none do.
	Next uint64
}

// errWorkflowPageFull stops the walk of WorkflowPage one workflow past the page.
var errWorkflowPageFull = errors.New("page full")

// WorkflowPage returns the first limit workflows that f selects, in the
// order they were created. It reads one more than it returns, to tell
// whether more follow. A status filter reads the workflows it skips: along
// a user's index, that user's only.
func (t *Tx) WorkflowPage(f WorkflowFilter, limit int) (WorkflowPage, error) {
	if limit < 1 {
		return WorkflowPage{}, fmt.Errorf("workflow page: limit %d: it must be at least 1", limit)
	}
	var p WorkflowPage
	var last uint64
	err := t.eachIndexedWorkflow(f.User, f.After, func(seq uint64, w Workflow) error {
		if f.Status != "" && w.Status != f.Status {
			return nil
		}
		if len(p.Workflows) == limit {
			p.Next = last
			return errWorkflowPageFull
		}
		p.Workflows, last = append(p.Workflows, w), seq
		return nil
	})
	if errors.Is(err, errWorkflowPageFull) {
		err = nil
	}
	return p, err
}

// eachIndexedWorkflow calls fn with each workflow created after creation
// number after, of user (all users when empty), in creation order, and
// stops at the first error fn returns, returning it unchanged.
func (t *Tx) eachIndexedWorkflow(user string, after uint64, fn func(seq uint64, w Workflow) error) error {
	bucket, prefix := bWorkflowsBySeq, []byte{}
	if user != "" {
		bucket, prefix = bWorkflowsByUser, userPrefix(user)
	}
	if after == ^uint64(0) {
		return nil // nothing follows, and after+1 would wrap to the start
	}
	c := t.bucket(bucket).Cursor()
	for k, id := c.Seek(append(bytes.Clone(prefix), u64(after+1)...)); k != nil && bytes.HasPrefix(k, prefix); k, id = c.Next() {
		if len(k) != len(prefix)+8 {
			continue // another user whose id begins with this user's and a NUL
		}
		w, err := t.Workflow(string(id))
		if err != nil {
			return fmt.Errorf("workflow index: %w", err)
		}
		if user != "" && w.User != user {
			return fmt.Errorf("workflow index: %q is %s's, indexed under %s", w.ID, w.User, user)
		}
		if err := fn(binary.BigEndian.Uint64(k[len(prefix):]), w); err != nil {
			return err
		}
	}
	return nil
}
