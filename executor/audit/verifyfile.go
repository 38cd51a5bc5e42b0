package audit

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"

	"github.com/oklog/ulid/v2"
)

// Reasons a checkpoint fails against the chain (an exported file, or the
// store: Verify), besides its signature (ErrCheckpoint's message).
const (
	ReasonCheckpointHead   = "the record at the checkpoint's position is not the one it signed: the chain was rewritten"
	ReasonCheckpointBeyond = "the chain ends before the checkpoint's position: records were removed from its end, or the file was exported before the checkpoint was made (export again)"
	ReasonCheckpointOrder  = "checkpoints out of position order"
)

// FileReport is the result of VerifyExport.
type FileReport struct {
	OK bool `json:"ok"`
	// Records is the number of records in the file.
	Records int `json:"records"`
	// Head is the last record's hash when OK.
	Head string `json:"head,omitempty"`
	// Checkpoints is the number of checkpoints checked; Anchored is the
	// position of the last one: the records up to it are proven by a
	// signature, the Records-Anchored after it by the chain alone.
	Checkpoints int    `json:"checkpoints"`
	Anchored    uint64 `json:"anchored"`
	// Broken is the first failure: a record (Index, ID) or a checkpoint
	// (Index is its position - 1, Checkpoint true).
	Broken *FileBreak `json:"broken,omitempty"`
}

// FileBreak locates the first failure of VerifyExport.
type FileBreak struct {
	Break
	// Checkpoint is true when a checkpoint failed, not a record.
	Checkpoint bool `json:"checkpoint,omitempty"`
}

// VerifyExport checks an exported log offline, as `countersign audit
// verify FILE --checkpoints F --key K` does: records is NDJSON, one record
// per line in chain order (GET /v1/audit?format=ndjson, countersign audit
// export); cps are signed checkpoints (GET /v1/audit/checkpoints, or the
// copies a sink kept); keys are the public keys the reviewer trusts.
//
// Every record must decode, hash to its hash by its version's rule, and
// link to the one before; every checkpoint must verify with a key of
// keys, come in position order, and name the record at its position with
// that record's hash. A consistent rewrite of the whole chain passes the
// first checks and fails the last one, unless its author holds a key.
// The error is for input that cannot be read at all.
func VerifyExport(records io.Reader, cps []Checkpoint, keys map[string]ed25519.PublicKey) (FileReport, error) {
	var rep FileReport
	for i, c := range cps {
		if err := c.Verify(keys); err != nil {
			rep.Broken = &FileBreak{Break: Break{Index: int(c.Position) - 1, ID: c.ID, Reason: err.Error()}, Checkpoint: true}
			break
		}
		if i > 0 && c.Position <= cps[i-1].Position {
			rep.Broken = &FileBreak{Break: Break{Index: int(c.Position) - 1, ID: c.ID, Reason: ReasonCheckpointOrder}, Checkpoint: true}
			break
		}
	}
	at := map[uint64]Checkpoint{}
	for _, c := range cps {
		at[c.Position] = c
	}
	var (
		prevHash string
		prevID   ulid.ULID
	)
	r := bufio.NewReader(records)
	for {
		line, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			i := rep.Records
			rep.Records++
			if rep.Broken == nil {
				rec, id, reason := checkLine(line, i, prevHash, prevID)
				if reason != "" {
					rep.Broken = &FileBreak{Break: Break{Index: i, ID: rec.ID, Reason: reason}}
				} else if c, ok := at[uint64(i+1)]; ok && (c.ID != rec.ID || c.Head != rec.Hash) {
					rep.Broken = &FileBreak{Break: Break{Index: i, ID: rec.ID, Reason: ReasonCheckpointHead}, Checkpoint: true}
				} else if ok {
					rep.Checkpoints++
					rep.Anchored = c.Position
				}
				prevHash, prevID = rec.Hash, id
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return FileReport{}, fmt.Errorf("read the exported audit: %w", err)
		}
	}
	if rep.Broken == nil {
		for _, c := range cps {
			if c.Position > uint64(rep.Records) {
				rep.Broken = &FileBreak{Break: Break{Index: int(c.Position) - 1, ID: c.ID, Reason: ReasonCheckpointBeyond}, Checkpoint: true}
				break
			}
		}
	}
	rep.OK = rep.Broken == nil
	if rep.OK {
		rep.Head = prevHash
	}
	return rep, nil
}

// checkLine is check for a line of an exported file: the id inside the
// record is its own key.
func checkLine(line []byte, i int, prevHash string, prevID ulid.ULID) (Record, ulid.ULID, string) {
	r, err := decode(bytes.TrimSpace(line))
	if err != nil {
		return Record{}, ulid.ULID{}, ReasonUndecodable + ": " + err.Error()
	}
	return check([]byte(r.ID), bytes.TrimSpace(line), i, prevHash, prevID)
}

// ReadCheckpoints reads checkpoints as NDJSON, one per line (GET
// /v1/audit/checkpoints?format=ndjson, or a sink's copies one per line),
// strictly.
func ReadCheckpoints(r io.Reader) ([]Checkpoint, error) {
	var out []Checkpoint
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; s.Scan(); n++ {
		line := bytes.TrimSpace(s.Bytes())
		if len(line) == 0 {
			continue
		}
		c, err := DecodeCheckpoint(line)
		if err != nil {
			return nil, fmt.Errorf("checkpoints, line %d: %w", n, err)
		}
		out = append(out, c)
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("read checkpoints: %w", err)
	}
	return out, nil
}
