package audit_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/audit/jcs"
	"github.com/countersign/countersign/executor/store"
)

// FuzzDecode feeds arbitrary bytes to the decoder the verifier uses on the
// file's contents. It must never panic, and whatever it accepts must hash
// the same after being stored again: verification depends on a decoded
// record re-encoding to the bytes its hash was taken over.
func FuzzDecode(f *testing.F) {
	db, log, _ := setup(f)
	recs := mustAppend(f, db, log, refund(0), refund(1))
	for _, r := range recs {
		b, _ := json.Marshal(r)
		f.Add(b)
	}
	f.Add([]byte(`{"id":"x","at":"2026-11-29T09:00:00+01:00","kind":"k","actor":"a","detail":{"n":1e400,"s":"\ud800"},"prev":"","hash":""}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"args":{ "b" : 1, "a" : [ ] }}`))
	f.Add([]byte(`{"id":"01KB5Y4QG0ABCDEFGHJKMNPQRS","at":"2026-11-29T09:00:00.5Z","kind":"k","actor":"a<b>","workflow":"W\u2028","n":-3,"tool":"t","args":{"z":1E30,"a":"\u00e9"},"detail":{"x":[1.50,null],"\ud83d\ude00":true,"\ufb33":0},"pending":9007199254740993,"version":1,"prev":"p","hash":"h"}`))
	f.Fuzz(func(t *testing.T, value []byte) {
		r, err := audit.Decode(value)
		if err != nil {
			return
		}
		sum, err := r.Sum()
		if err != nil {
			return // e.g. a year json cannot write: Verify reports a hash mismatch
		}
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("a record that hashes does not encode: %v", err)
		}
		r2, err := audit.Decode(again)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v\n%s", err, again)
		}
		if sum2, _ := r2.Sum(); sum2 != sum {
			t.Fatalf("hash changed across a round trip\nfirst  %s\nsecond %s", value, again)
		}
		// A version 1 record hashes what any JCS tool makes of its stored
		// line without "hash".
		if r.Version != audit.VersionJCS {
			return
		}
		var line map[string]any
		dec := json.NewDecoder(bytes.NewReader(again))
		dec.UseNumber()
		if err := dec.Decode(&line); err != nil {
			t.Fatal(err)
		}
		delete(line, "hash")
		want, err := jcs.Value(line)
		if err != nil {
			return
		}
		if got, _ := r.Canonical(); !bytes.Equal(got, want) {
			t.Fatalf("canonical form\n%s\nwhat a JCS tool makes of the line\n%s", got, want)
		}
	})
}

// FuzzVerifyStoredValue puts arbitrary bytes in the middle of a valid chain:
// Verify must not panic and must report that record as the first break
// unless the bytes are the original record.
func FuzzVerifyStoredValue(f *testing.F) {
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"id":"","at":"0001-01-01T00:00:00Z","kind":"","actor":"","prev":"","hash":""}`))
	f.Fuzz(func(t *testing.T, value []byte) {
		db, log, _ := setup(t)
		recs := mustAppend(t, db, log, refund(0), refund(1), refund(2))
		if err := db.Update(func(tx *store.Tx) error { return tx.AppendAudit([]byte(recs[2].ID+"0"), value) }); err != nil {
			t.Fatal(err)
		}
		rep, err := audit.Verify(db)
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK || rep.Broken == nil || rep.Broken.Index != 3 || rep.Records != 4 {
			t.Fatalf("verify = %+v for %q", rep, value)
		}
	})
}

// FuzzVerifyExport feeds arbitrary files to the offline check a reviewer
// runs on what they were handed: an export, its checkpoints and keys. It
// must never panic, and must never call a file OK that has a checkpoint
// it does not cover.
func FuzzVerifyExport(f *testing.F) {
	db, log, _ := setup(f)
	s := newSigner(f)
	mustAppend(f, db, log, refund(0), refund(1))
	checkpoint(f, db, log, s, audit.CheckpointRule{Every: 1})
	cps, _ := audit.Checkpoints(db, 0)
	cpLines, _ := json.Marshal(cps[0])
	keys, _ := json.Marshal(audit.JWKS{Keys: []audit.JWK{s.JWK()}})
	f.Add(ndjson(f, export(f, db, log)).Bytes(), cpLines, keys)
	f.Add([]byte("{}\n\n{\"id\":1}"), []byte(`{"position":18446744073709551615,"id":"","head":"","at":"0001-01-01T00:00:00Z","kid":"","sig":""}`), []byte(`{"keys":[]}`))
	f.Add([]byte(""), []byte("not json"), []byte("-----BEGIN PUBLIC KEY-----\n-----END PUBLIC KEY-----"))
	f.Fuzz(func(t *testing.T, file, checkpoints, keyFile []byte) {
		trust, err := audit.ParseKeys(keyFile)
		if err != nil {
			return
		}
		cps, err := audit.ReadCheckpoints(bytes.NewReader(checkpoints))
		if err != nil {
			return
		}
		rep, err := audit.VerifyExport(bytes.NewReader(file), cps, trust)
		if err != nil || !rep.OK {
			return
		}
		for _, c := range cps {
			if c.Position > uint64(rep.Records) {
				t.Fatalf("OK with a checkpoint at %d beyond %d records", c.Position, rep.Records)
			}
		}
	})
}
