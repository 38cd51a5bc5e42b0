package store

import (
	"time"

	"github.com/countersign/countersign/executor/tool"
)

// bRejections holds proposals the tool's schema refused, which never
// became steps: key the sequence number, value a Rejection as JSON. The
// control-effectiveness report counts them.
var bRejections = []byte("rejections")

// Rejection is one proposal refused by its tool's schema.
type Rejection struct {
	At           time.Time `json:"at"`
	Workflow     string    `json:"workflow"`
	Tool         tool.Name `json:"tool"`
	AgentVersion string    `json:"agent_version,omitempty"`
	Reason       string    `json:"reason"`
}

// AppendRejection records a schema rejection.
func (t *Tx) AppendRejection(r Rejection) error {
	seq, err := t.bucket(bRejections).NextSequence()
	if err != nil {
		return err
	}
	return t.putJSON(bRejections, u64(seq), r)
}

// Rejections calls fn with every schema rejection at or after since, oldest
// first.
func (t *Tx) Rejections(since time.Time, fn func(Rejection) error) error {
	return t.bucket(bRejections).ForEach(func(k, v []byte) error {
		var r Rejection
		if err := decodeJSON(bRejections, k, v, &r); err != nil {
			return err
		}
		if r.At.Before(since) {
			return nil
		}
		return fn(r)
	})
}
