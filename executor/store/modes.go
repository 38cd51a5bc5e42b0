package store

import (
	"fmt"
	"time"

	"github.com/countersign/countersign/executor/breaker"
)

// Buckets of earned autonomy.
//
//   - modes: key the tool's name; value a ModeSetting as JSON. Absent: the
//     bundle's default mode for the tool.
//   - breakers: key the tool's name, NUL, the agent version (possibly
//     empty); value a Breaker as JSON.
var (
	bModes    = []byte("modes")
	bBreakers = []byte("breakers")
)

// ModeSetting is an operator's choice of a tool's mode, which overrides
// the bundle's default until the next choice.
type ModeSetting struct {
	Mode   string    `json:"mode"`
	By     string    `json:"by"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// Breaker is the circuit breaker of one tool for one agent version.
type Breaker struct {
	Tool         string `json:"tool"`
	AgentVersion string `json:"agent_version"`
	breaker.State
}

// Mode returns the operator's setting of tool's mode; ok false when none
// was ever made.
func (t *Tx) Mode(tool string) (m ModeSetting, ok bool, err error) {
	err = t.getJSON(bModes, []byte(tool), &m)
	if err == ErrNotFound {
		return m, false, nil
	}
	return m, err == nil, err
}

// SetMode stores the operator's setting of tool's mode.
func (t *Tx) SetMode(tool string, m ModeSetting) error {
	return t.putJSON(bModes, []byte(tool), m)
}

func breakerKey(tool, version string) []byte {
	return append(append([]byte(tool), 0), version...)
}

// Breaker returns the breaker of tool for agent version: the zero state
// (no failures, not tripped) when it has none.
func (t *Tx) Breaker(tool, version string) (Breaker, error) {
	b := Breaker{Tool: tool, AgentVersion: version}
	err := t.getJSON(bBreakers, breakerKey(tool, version), &b)
	if err == ErrNotFound {
		return Breaker{Tool: tool, AgentVersion: version}, nil
	}
	return b, err
}

// PutBreaker stores b.
func (t *Tx) PutBreaker(b Breaker) error {
	return t.putJSON(bBreakers, breakerKey(b.Tool, b.AgentVersion), b)
}

// Breakers returns the breakers of tool, one per agent version that has
// failed, in version order.
func (t *Tx) Breakers(tool string) ([]Breaker, error) {
	prefix := append([]byte(tool), 0)
	var out []Breaker
	err := walk(t.bucket(bBreakers), prefix, prefixEnd(prefix), func(k, v []byte) error {
		var b Breaker
		if err := decodeJSON(bBreakers, k, v, &b); err != nil {
			return err
		}
		out = append(out, b)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ResetBreakers clears every breaker of tool (failures and trips) and
// returns the ones that were tripped.
func (t *Tx) ResetBreakers(tool string) ([]Breaker, error) {
	all, err := t.Breakers(tool)
	if err != nil {
		return nil, err
	}
	var tripped []Breaker
	for _, b := range all {
		if b.Tripped() {
			tripped = append(tripped, b)
		}
		if err := t.bucket(bBreakers).Delete(breakerKey(b.Tool, b.AgentVersion)); err != nil {
			return nil, fmt.Errorf("reset breaker %s/%s: %w", b.Tool, b.AgentVersion, err)
		}
	}
	return tripped, nil
}
