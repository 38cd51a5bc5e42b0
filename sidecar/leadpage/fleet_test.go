package leadpage_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/cmd/devstack"
	prodstack "github.com/countersign/countersign/cmd/stack"
	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/pgtest"
	"github.com/countersign/countersign/executor/simclock"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/sidecar/authn"
	"github.com/countersign/countersign/sidecar/leadpage"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// twoSidecars starts a fleet of two on one fresh PostgreSQL database,
// sharing a key-encryption key: a dev stack (a), whose simulators and
// identity provider both use, and a production stack (b) beside it. It
// returns them and the database's URL.
func twoSidecars(t *testing.T, clk *simclock.Clock) (*devstack.Stack, *prodstack.Stack, string) {
	t.Helper()
	dbURL := pgtest.URL(t)
	kek, err := credential.NewKeyEncryptionKey()
	if err != nil {
		t.Fatal(err)
	}
	a := stack(t, devstack.Options{StoreURL: dbURL, KeyEncryptionKey: kek, Clock: clk})
	b, err := prodstack.Start(context.Background(), prodstack.Options{
		DataDir: filepath.Join(t.TempDir(), "b"), StoreURL: dbURL, KeyEncryptionKey: kek, Agent: devstack.AgentID,
		LedgerURL: a.Endpoints.Ledger, OrdersURL: a.Endpoints.Orders, Clock: clk,
		Issuers:       []authn.Issuer{{Name: a.IdP.Name(), Keys: a.IdP.JWKS()}},
		PolicyTimeout: devstack.InProcessPolicyTimeout,
	})
	if err != nil {
		t.Fatalf("start the second sidecar: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return a, b, dbURL
}

// on is a browser of sidecar base holding the cookies of from: the same
// browser, sent to another sidecar by the load balancer.
func on(base string, from *browser) *browser {
	b := newBrowser(base, nil)
	for k, c := range from.cookies {
		cp := *c
		b.cookies[k] = &cp
	}
	return b
}

// A lead signed in on one sidecar of a fleet is signed in on the other:
// the queue, an approval and a rejection work there with the same cookie
// and CSRF token, and the notice left there shows here. Signing out on
// the other ends the session on the first.
func TestASessionIsTheFleets(t *testing.T) {
	a, b, _ := twoSidecars(t, simclock.New(time.Now().UTC().Truncate(time.Second)))
	approve := requestRefund(t, a, "rep-ben", "W1", "O-1004", 40000)
	reject := requestRefund(t, a, "rep-ben", "W2", "O-1003", 6000)

	onA := newBrowser(a.URL, nil)
	onA.signIn(t, a.Tokens["lead-eli"])
	csrf := onA.get(t, "/approvals").csrf(t)
	onB := on(b.URL, onA)

	q := onB.get(t, "/approvals")
	q.want(t, http.StatusOK, "")
	if !strings.Contains(q.body, "lead-eli · lead") || !strings.Contains(q.body, `id="approval-`+approve+`"`) {
		t.Fatalf("the other sidecar does not show lead-eli her queue: %s", q.body)
	}
	if got := q.csrf(t); got != csrf {
		t.Errorf("the other sidecar's forms carry CSRF token %q, want the session's %q", got, csrf)
	}
	p := onB.post(t, "/approvals/"+approve+"/approve", url.Values{"csrf": {csrf}, "comment": {"checked"}})
	if p.status != http.StatusSeeOther || p.location() != "/approvals" {
		t.Fatalf("approve on the other sidecar: %d to %q, want 303 to /approvals; %s", p.status, p.location(), p.body)
	}
	if s, by, _ := approvalStatus(t, a, approve); s != "approved" || by != "lead-eli" {
		t.Errorf("approval %s is %s by %q, want approved by lead-eli", approve, s, by)
	}
	if n := onA.get(t, "/approvals"); !strings.Contains(n.body, "Approved "+approve) {
		t.Errorf("the notice left by the other sidecar is not shown on the first: %s", n.body)
	}
	p = onB.post(t, "/approvals/"+reject+"/reject", url.Values{"csrf": {csrf}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("reject on the other sidecar: %d; %s", p.status, p.body)
	}
	if s, _, _ := approvalStatus(t, a, reject); s != "rejected" {
		t.Errorf("approval %s is %s, want rejected", reject, s)
	}
	onB.post(t, "/approvals/"+reject+"/reject", url.Values{"csrf": {"x"}}).want(t, http.StatusForbidden, "csrf_token_invalid")

	p = onB.post(t, "/logout", url.Values{"csrf": {csrf}})
	if p.status != http.StatusSeeOther || p.location() != "/login?ended=signed_out" {
		t.Fatalf("sign-out on the other sidecar: %d to %q", p.status, p.location())
	}
	p = onA.get(t, "/approvals")
	if p.status != http.StatusSeeOther || p.location() != "/login?ended=session_ended" {
		t.Errorf("after signing out on the other sidecar, the first answers %d to %q, want 303 to /login?ended=session_ended",
			p.status, p.location())
	}
}

// kvRows are the raw rows of the page_sessions bucket and every value of
// the database, as a reader of it sees them.
func kvRows(t *testing.T, dbURL string) (sessions map[string][]byte, all []byte) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT bucket, key, value FROM kv`)
	if err != nil {
		t.Fatal(err)
	}
	sessions = map[string][]byte{}
	var dump [][]byte
	for rows.Next() {
		var bucket string
		var k, v []byte
		if err := rows.Scan(&bucket, &k, &v); err != nil {
			t.Fatal(err)
		}
		if bucket == "page_sessions" {
			sessions[string(k)] = v
		}
		dump = append(dump, k, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return sessions, bytes.Join(dump, []byte{0})
}

// The database holds a session under the SHA-256 of its id, without the id
// and without the token in any form; a session past its token's exp is
// deleted when it is next used, on any sidecar.
func TestTheDatabaseHoldsNeitherTokenNorSessionID(t *testing.T) {
	clk := simclock.New(time.Now().UTC().Truncate(time.Second))
	a, b, dbURL := twoSidecars(t, clk)
	onA := newBrowser(a.URL, nil)
	onA.signIn(t, a.Tokens["lead-eli"])
	id := onA.cookies["countersign_session"].Value

	rows, all := kvRows(t, dbURL)
	sum := sha256.Sum256([]byte(id))
	if len(rows) != 1 || rows[string(sum[:])] == nil {
		t.Fatalf("page_sessions holds %d rows, want one under the SHA-256 of the session id", len(rows))
	}
	token := a.Tokens["lead-eli"]
	payload := token[strings.Index(token, ".")+1 : strings.LastIndex(token, ".")]
	for name, form := range map[string]string{
		"token":                  token,
		"token's payload":        payload,
		"token's signature":      token[strings.LastIndex(token, ".")+1:],
		"token in std base64":    base64.StdEncoding.EncodeToString([]byte(token)),
		"session id":             id,
		"session id, hex of raw": hex.EncodeToString(mustDecode(t, id)),
	} {
		if bytes.Contains(all, []byte(form)) {
			t.Errorf("the database holds the %s", name)
		}
	}
	if bytes.Contains(all, mustDecode(t, id)) {
		t.Error("the database holds the session id's raw bytes")
	}

	clk.Advance(25 * time.Hour) // past the dev tokens' 24 h
	p := on(b.URL, onA).get(t, "/approvals")
	if p.status != http.StatusSeeOther || p.location() != "/login?ended=token_expired" {
		t.Fatalf("an expired session answered %d to %q, want 303 to /login?ended=token_expired", p.status, p.location())
	}
	if rows, _ := kvRows(t, dbURL); len(rows) != 0 {
		t.Errorf("after its expiry was seen, page_sessions still holds %d rows", len(rows))
	}
}

func mustDecode(t *testing.T, id string) []byte {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// Sessions in the store: a sign-in deletes the sessions past their
// expiry; a session ended on one sidecar is gone for another; a notice is
// taken once; a session whose sealed token was moved to another session's
// row does not open.
func TestStoreSessions(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	open := func() *store.DB {
		db, err := store.OpenPostgres(ctx, dbURL, store.PostgresOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	kek, err := credential.NewKeyEncryptionKey()
	if err != nil {
		t.Fatal(err)
	}
	clk := simclock.New(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
	dbA, dbB := open(), open()
	a, b := leadpage.NewStoreSessions(dbA, kek, clk), leadpage.NewStoreSessions(dbB, kek, clk)

	short, _, err := a.Create(ctx, "token-short", clk.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	long, made, err := a.Create(ctx, "token-long", clk.Now().Add(48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Get(ctx, long)
	if err != nil || got != made || got.Token != "token-long" {
		t.Fatalf("Get on the other sidecar = %+v, %v; want %+v", got, err, made)
	}
	if err := b.SetNotice(ctx, long, "Approved A-1."); err != nil {
		t.Fatal(err)
	}
	if n, err := a.TakeNotice(ctx, long); err != nil || n != "Approved A-1." {
		t.Errorf("TakeNotice = %q, %v; want the notice left on the other sidecar", n, err)
	}
	if n, err := b.TakeNotice(ctx, long); err != nil || n != "" {
		t.Errorf("TakeNotice again = %q, %v; want it taken", n, err)
	}

	clk.Advance(2 * time.Hour)
	third, _, err := b.Create(ctx, "token-third", clk.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Get(ctx, short); !errors.Is(err, leadpage.ErrNoSession) {
		t.Errorf("the expired session after a sign-in: %v, want ErrNoSession (deleted)", err)
	}
	if rows, _ := kvRows(t, dbURL); len(rows) != 2 {
		t.Errorf("page_sessions holds %d rows, want the 2 alive", len(rows))
	}

	// Someone with write access to the database copies long's sealed
	// token into third's row, hoping to sign in as long's person with
	// third's cookie.
	longKey, thirdKey := sha256.Sum256([]byte(long)), sha256.Sum256([]byte(third))
	if err := dbA.Update(func(tx *store.Tx) error {
		l, err := tx.PageSession(longKey[:])
		if err != nil {
			return err
		}
		th, err := tx.PageSession(thirdKey[:])
		if err != nil {
			return err
		}
		th.SealedToken = l.SealedToken
		return tx.PutPageSession(thirdKey[:], th)
	}); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Get(ctx, third); !errors.Is(err, credential.ErrKeyEncryptionKey) || got.Token != "" {
		t.Errorf("Get of a session with a moved token = %+v, %v; want ErrKeyEncryptionKey", got, err)
	}

	if err := b.End(ctx, long); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Get(ctx, long); !errors.Is(err, leadpage.ErrNoSession) {
		t.Errorf("a session ended on the other sidecar: %v, want ErrNoSession", err)
	}
	if err := a.End(ctx, long); err != nil {
		t.Errorf("ending it again: %v, want no error", err)
	}
}
