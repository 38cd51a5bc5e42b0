package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/countersign/countersign/executor/audit/jcs"
)

// Kind says what a record is about.
type Kind string

// Kinds the sidecar writes. Detail holds what is specific to each.
const (
	KindWorkflow     Kind = "workflow"     // a workflow opened: by whom, for which agent and ticket, within which bounds
	KindDecision     Kind = "decision"     // a policy decision on a step
	KindApproval     Kind = "approval"     // an approval requested, approved, rejected, used, expired, void
	KindDispatch     Kind = "dispatch"     // an effect about to be sent to a system of record
	KindResult       Kind = "result"       // what came back (done, refused, unknown, reconciled)
	KindSwitch       Kind = "switch"       // a tool switched on or off
	KindEpoch        Kind = "epoch"        // the credential epoch raised
	KindBundle       Kind = "bundle"       // a bundle activation attempt, with the gate's result
	KindCompensation Kind = "compensation" // a ratification or a reversal
	KindAlert        Kind = "alert"        // a monitor's alert
	KindMode         Kind = "mode"         // a tool's mode set by an operator (and its breakers reset)
	KindBreaker      Kind = "breaker"      // a breaker tripped: a tool in approval_only for one agent version
)

// Actors that are not people. A person is recorded by the sub of the token
// they acted with.
const (
	ActorEngine  = "engine"
	ActorMonitor = "monitor"
)

// Record is one entry of the log. Append fills ID, Prev and Hash (and At
// when it is zero); the caller fills the rest.
type Record struct {
	ID       string          `json:"id"`
	At       time.Time       `json:"at"`
	Kind     Kind            `json:"kind"`
	Actor    string          `json:"actor"`
	Workflow string          `json:"workflow,omitempty"`
	N        int             `json:"n,omitempty"`
	Tool     string          `json:"tool,omitempty"`
	Args     json.RawMessage `json:"args,omitempty"`
	Detail   map[string]any  `json:"detail,omitempty"`
	// Pending is the number a fleet's record had while it waited to be
	// chained (Sequence), which the decision log names (0 on bbolt).
	Pending uint64 `json:"pending,omitempty"`
	// Version is the rule the record's Hash was made by: VersionJCS for
	// every record chained since; absent (0) for a record chained before,
	// which keeps verifying by the rule it was made by (Sum).
	Version int    `json:"version,omitempty"`
	Prev    string `json:"prev"`
	Hash    string `json:"hash"`
}

// Hash rules (Record.Version).
const (
	// VersionLegacy (the field absent): sha256 over Prev, a newline and
	// the record's fields as Go's encoder writes them, keys sorted. Kept
	// so that records written before VersionJCS verify.
	VersionLegacy = 0
	// VersionJCS: sha256 over the RFC 8785 canonical form of the record
	// without its hash member, the form any JCS implementation recomputes
	// from an exported line.
	VersionJCS = 1
)

// canonical is a Record without its Hash, its fields declared in the
// order of their JSON names so that encoding/json writes the keys sorted.
// Args and Detail are written as they are: Append normalized them (keys
// sorted, numbers as their literal text), and Decode keeps numbers as their
// literal text, so the bytes recompute exactly after a round trip.
type canonical struct {
	Actor    string          `json:"actor"`
	Args     json.RawMessage `json:"args,omitempty"`
	At       time.Time       `json:"at"`
	Detail   map[string]any  `json:"detail,omitempty"`
	ID       string          `json:"id"`
	Kind     Kind            `json:"kind"`
	N        int             `json:"n,omitempty"`
	Pending  uint64          `json:"pending,omitempty"`
	Prev     string          `json:"prev"`
	Tool     string          `json:"tool,omitempty"`
	Workflow string          `json:"workflow,omitempty"`
}

// Canonical is the byte form the record's hash is taken over, by the rule
// its Version names: for VersionJCS the RFC 8785 form of the record as
// stored without its "hash" member; for VersionLegacy the record without
// Hash as Go's encoder writes it, keys sorted, no white space.
func (r Record) Canonical() ([]byte, error) {
	switch r.Version {
	case VersionLegacy:
		return r.legacy()
	case VersionJCS:
		return r.jcs()
	}
	return nil, fmt.Errorf("canonical record %s: %w: %d", r.ID, ErrVersion, r.Version)
}

// jcs is the RFC 8785 form of the record as encode stores it, without
// "hash": what a reviewer computes from an exported line. It is written
// member by member (the names are ASCII, so their order is fixed) rather
// than by encoding the record and canonicalizing the result, which took
// five times as long; FuzzDecode holds the two to the same bytes.
func (r Record) jcs() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	member := func(name string, value []byte) {
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteString(`"` + name + `":`)
		b.Write(value)
	}
	text := func(s string) []byte { v, _ := jcs.Value(s); return v } // a string always canonicalizes
	number := func(n string) ([]byte, error) { return jcs.Value(json.Number(n)) }
	at, err := r.At.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("canonical record %s: %w", r.ID, err)
	}
	member("actor", text(r.Actor))
	if len(r.Args) > 0 {
		args, err := jcs.Transform(r.Args)
		if err != nil {
			return nil, fmt.Errorf("canonical record %s: args: %w", r.ID, err)
		}
		member("args", args)
	}
	member("at", at) // RFC 3339 in quotes: nothing in it to escape
	if len(r.Detail) > 0 {
		detail, err := jcs.Value(map[string]any(r.Detail))
		if err != nil { // Go values Append has not normalized yet
			detail, err = jcs.Marshal(r.Detail)
		}
		if err != nil {
			return nil, fmt.Errorf("canonical record %s: detail: %w", r.ID, err)
		}
		member("detail", detail)
	}
	member("id", text(r.ID))
	member("kind", text(string(r.Kind)))
	for _, n := range []struct {
		name  string
		value uint64
		set   bool
	}{{"n", uint64(r.N), r.N != 0}, {"pending", r.Pending, r.Pending != 0}} {
		if !n.set {
			continue
		}
		v := strconv.FormatUint(n.value, 10)
		if n.name == "n" {
			v = strconv.Itoa(r.N) // n may be negative in a hand-made record
		}
		c, err := number(v)
		if err != nil {
			return nil, fmt.Errorf("canonical record %s: %s: %w", r.ID, n.name, err)
		}
		member(n.name, c)
	}
	member("prev", text(r.Prev))
	if r.Tool != "" {
		member("tool", text(r.Tool))
	}
	member("version", []byte(strconv.Itoa(r.Version)))
	if r.Workflow != "" {
		member("workflow", text(r.Workflow))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// legacy is the canonical form of VersionLegacy.
func (r Record) legacy() ([]byte, error) {
	b, err := json.Marshal(canonical{
		Actor: r.Actor, Args: r.Args, At: r.At, Detail: r.Detail, ID: r.ID,
		Kind: r.Kind, N: r.N, Pending: r.Pending, Prev: r.Prev, Tool: r.Tool, Workflow: r.Workflow,
	})
	if err != nil {
		return nil, fmt.Errorf("canonical record %s: %w", r.ID, err)
	}
	return b, nil
}

// Sum is the hash the record's Hash field must hold: for VersionJCS
// hex(sha256(Canonical)), Prev being inside the canonical form; for
// VersionLegacy hex(sha256(Prev + "\n" + Canonical)).
func (r Record) Sum() (string, error) {
	c, err := r.Canonical()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	if r.Version == VersionLegacy {
		h.Write([]byte(r.Prev))
		h.Write([]byte{'\n'})
	}
	h.Write(c)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Decode reads one stored record. It is strict: unknown fields and trailing
// data are errors, because bytes the hash does not cover have no business in
// a record. Numbers in Detail stay json.Number, their literal text.
func Decode(value []byte) (Record, error) {
	r, err := decode(value)
	if err != nil {
		return Record{}, fmt.Errorf("decode audit record: %w", err)
	}
	return r, nil
}

func decode(value []byte) (Record, error) {
	if v := bytes.TrimLeft(value, " \t\r\n"); len(v) == 0 || v[0] != '{' {
		return Record{}, errors.New("not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	var r Record
	if err := dec.Decode(&r); err != nil {
		return Record{}, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Record{}, errors.New("data after the record")
	}
	return r, nil
}

// encode is the stored form of a record (with its Hash).
func encode(r Record) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode audit record %s: %w", r.ID, err)
	}
	return b, nil
}

// normalize puts Args and Detail into the form that survives a round trip
// through the store byte for byte: object keys sorted, no white space,
// numbers as literal text (so a large integer is never rounded through
// float64), and no value of a Go type that a decoder would not give back.
func normalize(r *Record) error {
	if len(r.Args) == 0 || string(bytes.TrimSpace(r.Args)) == "null" {
		r.Args = nil
	} else {
		var v any
		if err := unmarshalNumbers(r.Args, &v); err != nil {
			return fmt.Errorf("%w: args are not JSON: %v", ErrInvalid, err)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("%w: args: %v", ErrInvalid, err)
		}
		r.Args = b
	}
	if len(r.Detail) == 0 {
		r.Detail = nil
		return nil
	}
	b, err := json.Marshal(r.Detail)
	if err != nil {
		return fmt.Errorf("%w: detail: %v", ErrInvalid, err)
	}
	var d map[string]any
	if err := unmarshalNumbers(b, &d); err != nil {
		return fmt.Errorf("%w: detail: %v", ErrInvalid, err)
	}
	r.Detail = d
	return nil
}

func unmarshalNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data after the value")
	}
	return nil
}
