package audit_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/pgtest"
	"github.com/countersign/countersign/executor/store"
)

func newSigner(t testing.TB) audit.Signer {
	t.Helper()
	key, _, err := audit.LoadOrCreateKey(filepath.Join(t.TempDir(), "audit-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	return audit.NewSigner(key)
}

func trusted(t testing.TB, s audit.Signer) map[string]ed25519.PublicKey {
	t.Helper()
	b, err := json.Marshal(audit.JWKS{Keys: []audit.JWK{s.JWK()}})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := audit.ParseKeys(b)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func checkpoint(t testing.TB, db *store.DB, l *audit.Log, s audit.Signer, rule audit.CheckpointRule) *audit.Checkpoint {
	t.Helper()
	c, _, err := l.Checkpoint(db, s, rule, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// export is the log as NDJSON, one record per line, as the export writes it.
func export(t testing.TB, db *store.DB, l *audit.Log) []audit.Record {
	t.Helper()
	page, err := l.List(db, "", audit.MaxLimit)
	if err != nil {
		t.Fatal(err)
	}
	return page.Records
}

func ndjson(t testing.TB, recs []audit.Record) *bytes.Buffer {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	return &b
}

// A checkpoint is due after Every records, or after Interval with at
// least one record; with nothing new, none is signed however long it
// waits.
func TestACheckpointIsSignedEveryNRecordsOrTSeconds(t *testing.T) {
	db, log, c := setup(t)
	s := newSigner(t)
	rule := audit.CheckpointRule{Every: 3, Interval: time.Minute}
	if cp := checkpoint(t, db, log, s, rule); cp != nil {
		t.Fatalf("an empty log was checkpointed: %+v", cp)
	}
	recs := mustAppend(t, db, log, refund(0), refund(1), refund(2))
	first := checkpoint(t, db, log, s, rule)
	if first == nil || first.Position != 3 || first.ID != recs[2].ID || first.Head != recs[2].Hash || first.KeyID != s.KeyID() {
		t.Fatalf("first checkpoint %+v; want position 3 at %s", first, recs[2].ID)
	}
	mustAppend(t, db, log, refund(3))
	if cp := checkpoint(t, db, log, s, rule); cp != nil {
		t.Fatalf("one record and no time later: %+v", cp)
	}
	c.Advance(time.Minute)
	second := checkpoint(t, db, log, s, rule)
	if second == nil || second.Position != 4 {
		t.Fatalf("a minute later: %+v; want position 4", second)
	}
	c.Advance(time.Hour)
	if cp := checkpoint(t, db, log, s, rule); cp != nil {
		t.Fatalf("nothing new: %+v", cp)
	}
	cps, err := audit.Checkpoints(db, 0)
	if err != nil || len(cps) != 2 {
		t.Fatalf("stored %+v, %v", cps, err)
	}
	for _, cp := range cps {
		if err := cp.Verify(trusted(t, s)); err != nil {
			t.Error(err)
		}
	}
}

// The offline check of an exported file: an intact export verifies;
// changing one record fails at that record; rewriting the whole chain
// consistently (every hash recomputed) passes the chain and fails at the
// checkpoint; checkpoints signed by another key fail; a file shorter than
// a checkpoint fails.
func TestAnExportedFileVerifiesOfflineAgainstSignedCheckpoints(t *testing.T) {
	db, log, c := setup(t)
	s := newSigner(t)
	keys := trusted(t, s)
	rule := audit.CheckpointRule{Every: 4, Interval: time.Hour}
	for i := range 10 {
		mustAppend(t, db, log, refund(i))
		checkpoint(t, db, log, s, rule)
		c.Advance(time.Second)
	}
	recs := export(t, db, log)
	cps, err := audit.Checkpoints(db, 0)
	if err != nil || len(cps) != 3 || cps[0].Position != 1 || cps[2].Position != 9 {
		t.Fatalf("checkpoints %+v, %v; want at 1 (the first record), 5 and 9", cps, err)
	}

	verify := func(t *testing.T, file io.Reader, cps []audit.Checkpoint, keys map[string]ed25519.PublicKey) audit.FileReport {
		t.Helper()
		rep, err := audit.VerifyExport(file, cps, keys)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	t.Run("the export as it is verifies", func(t *testing.T) {
		rep := verify(t, ndjson(t, recs), cps, keys)
		if !rep.OK || rep.Records != 10 || rep.Checkpoints != 3 || rep.Anchored != 9 || rep.Head != recs[9].Hash {
			t.Fatalf("%+v", rep)
		}
	})
	t.Run("one record changed fails at that record", func(t *testing.T) {
		lines := strings.SplitAfter(ndjson(t, recs).String(), "\n")
		lines[5] = strings.Replace(lines[5], `"amount":3005`, `"amount":9005`, 1)
		rep := verify(t, strings.NewReader(strings.Join(lines, "")), cps, keys)
		if rep.OK || rep.Broken.Index != 5 || rep.Broken.Reason != audit.ReasonHash {
			t.Fatalf("%+v", rep)
		}
	})
	t.Run("the whole chain rewritten consistently fails at a checkpoint", func(t *testing.T) {
		forged := rewrite(t, recs, 2)
		if rep := verify(t, ndjson(t, forged), nil, keys); !rep.OK {
			t.Fatalf("the rewritten chain should hold as a chain: %+v", rep.Broken)
		}
		rep := verify(t, ndjson(t, forged), cps, keys)
		if rep.OK || !rep.Broken.Checkpoint || rep.Broken.Index != 4 || rep.Broken.Reason != audit.ReasonCheckpointHead {
			t.Fatalf("%+v", rep.Broken)
		}
	})
	t.Run("checkpoints re-signed with another key fail", func(t *testing.T) {
		_, other, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		forged := rewrite(t, recs, 2)
		var resigned []audit.Checkpoint
		for _, cp := range cps {
			cp.Head = forged[cp.Position-1].Hash
			resigned = append(resigned, resign(t, other, cp))
		}
		rep := verify(t, ndjson(t, forged), resigned, keys)
		if rep.OK || !rep.Broken.Checkpoint || !strings.Contains(rep.Broken.Reason, "not among the trusted keys") {
			t.Fatalf("%+v", rep.Broken)
		}
		// And naming the trusted key:
		resigned[0].KeyID = s.KeyID()
		rep = verify(t, ndjson(t, forged), resigned, keys)
		if rep.OK || !strings.Contains(rep.Broken.Reason, "does not verify") {
			t.Fatalf("%+v", rep.Broken)
		}
	})
	t.Run("a file truncated before a checkpoint fails", func(t *testing.T) {
		rep := verify(t, ndjson(t, recs[:8]), cps, keys)
		if rep.OK || rep.Broken.Reason != audit.ReasonCheckpointBeyond {
			t.Fatalf("%+v", rep)
		}
	})
}

// rewrite changes the amount of record k and recomputes every hash from
// it on, as someone holding the store but not the key would.
func rewrite(t testing.TB, recs []audit.Record, k int) []audit.Record {
	t.Helper()
	out := make([]audit.Record, len(recs))
	copy(out, recs)
	out[k].Args = json.RawMessage(`{"amount":999999,"order":"O-1002"}`)
	for i := k; i < len(out); i++ {
		if i > 0 {
			out[i].Prev = out[i-1].Hash
		}
		sum, err := out[i].Sum()
		if err != nil {
			t.Fatal(err)
		}
		out[i].Hash = sum
	}
	return out
}

// resign signs cp with key, as someone who rewrote the chain and holds a
// key of their own would.
func resign(t testing.TB, key ed25519.PrivateKey, cp audit.Checkpoint) audit.Checkpoint {
	t.Helper()
	cp.KeyID = audit.NewSigner(key).KeyID()
	msg, err := cp.Signed()
	if err != nil {
		t.Fatal(err)
	}
	cp.Signature = base64.RawURLEncoding.EncodeToString(ed25519.Sign(key, msg))
	return cp
}

// sink is an HTTP endpoint outside the sidecar that keeps what it is
// posted, failing the first fail posts.
type sink struct {
	mu   sync.Mutex
	fail int
	got  []audit.Checkpoint
	seen chan struct{}
}

func (k *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fail > 0 {
		k.fail--
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		return
	}
	b, _ := io.ReadAll(r.Body)
	cp, err := audit.DecodeCheckpoint(b)
	if err != nil || r.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "bad checkpoint", http.StatusBadRequest)
		return
	}
	if n := len(k.got); n == 0 || k.got[n-1].Position < cp.Position { // deduplicate by position
		k.got = append(k.got, cp)
		k.seen <- struct{}{}
	}
}

// Checkpoints posted to a sink that fails at first arrive, in order, once
// each, and verify an export of the log with the published key.
func TestCheckpointsPostedToASinkVerifyTheExport(t *testing.T) {
	db, log, c := setup(t)
	s := newSigner(t)
	k := &sink{fail: 2, seen: make(chan struct{}, 16)}
	srv := httptest.NewServer(k)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		audit.Checkpointer{Log: log, DB: db, Signer: s, Rule: audit.CheckpointRule{Every: 2, Interval: time.Hour},
			Look: time.Millisecond, MaxBackoff: time.Millisecond, URL: srv.URL}.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })

	mustAppend(t, db, log, refund(0), refund(1))
	<-k.seen
	mustAppend(t, db, log, refund(2), refund(3), refund(4))
	<-k.seen
	c.Advance(time.Hour)
	mustAppend(t, db, log, refund(5))
	<-k.seen
	cancel()
	<-done

	keys, err := audit.Keys(db)
	if err != nil || len(keys.Keys) != 1 || keys.Keys[0].Kid != s.KeyID() {
		t.Fatalf("published keys %+v, %v", keys, err)
	}
	published, err := json.Marshal(keys)
	if err != nil {
		t.Fatal(err)
	}
	trust, err := audit.ParseKeys(published)
	if err != nil {
		t.Fatal(err)
	}
	k.mu.Lock()
	got := k.got
	k.mu.Unlock()
	rep, err := audit.VerifyExport(ndjson(t, export(t, db, log)), got, trust)
	if err != nil || !rep.OK || rep.Checkpoints != 3 || rep.Anchored != 6 {
		t.Fatalf("%+v, %v; sink holds %+v", rep, err, got)
	}
}

func TestKeysAreReadFromAJWKSAJWKOrAPEMAndCheckedAgainstTheirID(t *testing.T) {
	s := newSigner(t)
	jwk, _ := json.Marshal(s.JWK())
	wrongKid := strings.Replace(string(jwk), s.KeyID(), "someone-else", 1)
	for _, c := range []struct {
		name, in string
		ok       bool
	}{
		{"a JWKS", `{"keys":[` + string(jwk) + `]}`, true},
		{"one JWK", string(jwk), true},
		{"a JWK whose kid is not its thumbprint", wrongKid, false},
		{"an RSA key", `{"kty":"RSA","n":"AQAB","e":"AQAB"}`, false},
		{"nothing", `{"keys":[]}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			keys, err := audit.ParseKeys([]byte(c.in))
			if c.ok != (err == nil) || (c.ok && keys[s.KeyID()] == nil) {
				t.Fatalf("%v, %v", keys, err)
			}
			if err != nil && !errors.Is(err, audit.ErrKey) {
				t.Fatalf("%v is not ErrKey", err)
			}
		})
	}
}

// On a fleet only the sequencer signs: a sidecar that does not hold the
// sequencer lease signs nothing while another holds it, and takes over
// (signing with its own key, which it registers beside the first's) once
// the lease has expired. The checkpoints verify with the published keys.
func TestOnAFleetTheSequencerSigns(t *testing.T) {
	url := pgtest.URL(t)
	a, b := openFleetStore(t, url), openFleetStore(t, url)
	c := &clock{now: t0}
	log := audit.New(audit.Options{Clock: c})
	sa, sb := newSigner(t), newSigner(t)
	for _, s := range []audit.Signer{sa, sb} {
		if err := audit.RegisterKey(a, s); err != nil {
			t.Fatal(err)
		}
	}
	rule := audit.CheckpointRule{Every: 1}
	mustAppend(t, a, log, refund(0), refund(1))
	if n, err := log.Sequence(a, "sidecar-a", time.Second); err != nil || n != 2 {
		t.Fatalf("sequenced %d, %v", n, err)
	}
	if cp, held, err := log.Checkpoint(b, sb, rule, "sidecar-b", time.Second); err != nil || cp != nil || held {
		t.Fatalf("sidecar-b signed %+v (held %v, %v) while sidecar-a holds the lease", cp, held, err)
	}
	cp, held, err := log.Checkpoint(a, sa, rule, "sidecar-a", time.Second)
	if err != nil || cp == nil || !held || cp.Position != 2 || cp.KeyID != sa.KeyID() {
		t.Fatalf("sidecar-a: %+v, held %v, %v", cp, held, err)
	}
	mustAppend(t, b, log, refund(2))
	c.Advance(2 * time.Second)
	if n, err := log.Sequence(b, "sidecar-b", time.Second); err != nil || n != 1 {
		t.Fatalf("sidecar-b sequenced %d, %v", n, err)
	}
	cp, _, err = log.Checkpoint(b, sb, rule, "sidecar-b", time.Second)
	if err != nil || cp == nil || cp.Position != 3 || cp.KeyID != sb.KeyID() {
		t.Fatalf("sidecar-b after the lease moved: %+v, %v", cp, err)
	}
	published, err := audit.Keys(b)
	if err != nil || len(published.Keys) != 2 {
		t.Fatalf("published %+v, %v", published, err)
	}
	raw, _ := json.Marshal(published)
	keys, err := audit.ParseKeys(raw)
	if err != nil {
		t.Fatal(err)
	}
	cps, err := audit.Checkpoints(a, 0)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := audit.VerifyExport(ndjson(t, export(t, a, log)), cps, keys)
	if err != nil || !rep.OK || rep.Checkpoints != 2 || rep.Anchored != 3 {
		t.Fatalf("%+v, %v", rep, err)
	}
}

// logLines is a log destination that hands each line to the test.
type logLines chan string

func (l logLines) Write(p []byte) (int, error) {
	select {
	case l <- string(p):
	default:
	}
	return len(p), nil
}

// A sink's URL may hold its credential (a token in the path): the
// warnings about a failing sink never repeat it.
func TestAFailingSinkIsLoggedWithoutItsURL(t *testing.T) {
	db, log, _ := setup(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusBadGateway)
	}))
	defer srv.Close()
	mustAppend(t, db, log, refund(0))
	lines := make(logLines, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	for _, url := range []string{srv.URL + "/hooks/s3cr3t-token", "http://hook:s3cr3t-token@127.0.0.1:1/hooks?key=s3cr3t-token"} {
		go func() {
			defer close(done)
			audit.Checkpointer{Log: log, DB: db, Signer: newSigner(t), Look: time.Millisecond, MaxBackoff: time.Millisecond,
				URL: url, Logger: slog.New(slog.NewTextHandler(lines, nil))}.Run(ctx)
		}()
		line := <-lines
		cancel()
		<-done
		if !strings.Contains(line, "will retry") || strings.Contains(line, "s3cr3t") {
			t.Fatalf("logged %q", line)
		}
		ctx, cancel = context.WithCancel(context.Background())
		done = make(chan struct{})
	}
	cancel()
}
