package credential_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/pgtest"
	"github.com/countersign/countersign/executor/simclock"
	"github.com/countersign/countersign/executor/store"
	"github.com/jackc/pgx/v5"
	"github.com/lestrrat-go/jwx/v3/jwk"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// A fleet is a store the sidecars share. sidecar opens it once more, as
// another sidecar would: on PostgreSQL a new connection pool on the same
// database; on bbolt, which one process holds, the same *store.DB.
type fleet struct {
	url string    // the PostgreSQL database, or "" on bbolt
	db  *store.DB // the bbolt store
}

func (f fleet) sidecar(t testing.TB) *store.DB {
	t.Helper()
	if f.url == "" {
		return f.db
	}
	db, err := store.OpenPostgres(context.Background(), f.url, store.PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// eachFleet runs test on PostgreSQL (skipped in one line without it) and
// on a bbolt store shared inside one process.
func eachFleet(t *testing.T, test func(t *testing.T, f fleet)) {
	t.Run("postgres", func(t *testing.T) { test(t, fleet{url: pgtest.URL(t)}) })
	t.Run("bbolt", func(t *testing.T) {
		db, err := store.Open(filepath.Join(t.TempDir(), "state.db"), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		test(t, fleet{db: db})
	})
}

func newKEK(t testing.TB) *credential.KeyEncryptionKey {
	t.Helper()
	kek, err := credential.NewKeyEncryptionKey()
	if err != nil {
		t.Fatal(err)
	}
	return kek
}

func openShared(t testing.TB, db *store.DB, kek *credential.KeyEncryptionKey) *credential.Authority {
	t.Helper()
	a, err := credential.Open(credential.Options{Store: db, KeyEncryptionKey: kek, Clock: simclock.New(t0)})
	if err != nil {
		t.Fatalf("Open on the store: %v", err)
	}
	return a
}

// fetchJWKS reads the JWKS a receiver would, over a real socket.
func fetchJWKS(t *testing.T, a *credential.Authority) jwk.Set {
	t.Helper()
	srv := httptest.NewServer(a.JWKSHandler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET JWKS: %d %s %v", resp.StatusCode, body, err)
	}
	set, err := jwk.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func tokenKid(t *testing.T, tok string) string {
	t.Helper()
	var h struct {
		Kid string `json:"kid"`
	}
	if err := json.Unmarshal(segment(t, tok, 0), &h); err != nil {
		t.Fatal(err)
	}
	return h.Kid
}

func TestFleetSidecarsMintTokensThatVerifyAgainstEithersJWKS(t *testing.T) {
	eachFleet(t, func(t *testing.T, f fleet) {
		kek := newKEK(t)
		a, b := openShared(t, f.sidecar(t), kek), openShared(t, f.sidecar(t), kek)
		if a.Epoch() != 1 || b.Epoch() != 1 {
			t.Fatalf("epochs %d and %d, want 1 and 1", a.Epoch(), b.Epoch())
		}
		toks := []string{mint(t, a, refundClaims()), mint(t, b, refundClaims())}
		for _, jwks := range []jwk.Set{fetchJWKS(t, a), fetchJWKS(t, b)} {
			for i, tok := range toks {
				if _, err := parse(tok, jwks, t0); err != nil {
					t.Errorf("token %d does not verify: %v", i, err)
				}
			}
		}
	})
}

func TestFleetRaiseThroughOneSidecarRevokesTheTokensOfAll(t *testing.T) {
	eachFleet(t, func(t *testing.T, f fleet) {
		kek := newKEK(t)
		a, b := openShared(t, f.sidecar(t), kek), openShared(t, f.sidecar(t), kek)
		before := []string{mint(t, a, refundClaims()), mint(t, b, refundClaims())}

		n, err := a.Raise(context.Background())
		if err != nil || n != 2 {
			t.Fatalf("Raise = %d, %v; want 2", n, err)
		}
		jwksA, jwksB := fetchJWKS(t, a), fetchJWKS(t, b)
		for _, jwks := range []jwk.Set{jwksA, jwksB} {
			if k, _ := jwks.Key(0); jwks.Len() != 1 || kidOf(k) != "epoch-2" {
				t.Fatalf("JWKS after the raise: %d keys, first %q; want only epoch-2", jwks.Len(), kidOf(k))
			}
			for i, tok := range before {
				if _, err := parse(tok, jwks, t0); err == nil {
					t.Errorf("token %d minted before the raise still verifies", i)
				}
			}
		}
		after := mint(t, b, refundClaims())
		if kid := tokenKid(t, after); kid != "epoch-2" {
			t.Errorf("the other sidecar's next token has kid %q, want epoch-2", kid)
		}
		if b.Epoch() != 2 {
			t.Errorf("the other sidecar's epoch is %d after minting, want 2", b.Epoch())
		}
		if _, err := parse(after, jwksA, t0); err != nil {
			t.Errorf("the other sidecar's new token does not verify against the raiser's JWKS: %v", err)
		}
	})
}

func TestFleetConcurrentRaisesEndAtDistinctEpochs(t *testing.T) {
	eachFleet(t, func(t *testing.T, f fleet) {
		kek := newKEK(t)
		sidecars := []*credential.Authority{openShared(t, f.sidecar(t), kek), openShared(t, f.sidecar(t), kek)}
		const perSidecar = 4
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			epochs []int
		)
		for _, a := range sidecars {
			for range perSidecar {
				wg.Go(func() {
					n, err := a.Raise(context.Background())
					if err != nil {
						t.Errorf("Raise: %v", err)
						return
					}
					mu.Lock()
					epochs = append(epochs, n)
					mu.Unlock()
				})
				wg.Go(func() {
					if _, err := a.Mint(context.Background(), refundClaims()); err != nil {
						t.Errorf("Mint during raises: %v", err)
					}
				})
			}
		}
		wg.Wait()
		slices.Sort(epochs)
		want := []int{2, 3, 4, 5, 6, 7, 8, 9}
		if !slices.Equal(epochs, want) {
			t.Fatalf("raises ended at epochs %v, want %v (distinct, none lost)", epochs, want)
		}
		for i, a := range sidecars {
			if kid := tokenKid(t, mint(t, a, refundClaims())); kid != "epoch-9" {
				t.Errorf("sidecar %d mints with %q after the raises, want epoch-9", i, kid)
			}
		}
	})
}

func TestFleetSidecarsStartingTogetherOnAnEmptyStoreShareOneKey(t *testing.T) {
	eachFleet(t, func(t *testing.T, f fleet) {
		kek := newKEK(t)
		dbs := []*store.DB{f.sidecar(t), f.sidecar(t), f.sidecar(t)}
		auths := make([]*credential.Authority, len(dbs))
		var wg sync.WaitGroup
		for i, db := range dbs {
			wg.Go(func() {
				a, err := credential.Open(credential.Options{Store: db, KeyEncryptionKey: kek})
				if err != nil {
					t.Errorf("Open: %v", err)
				}
				auths[i] = a
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		for i, a := range auths[1:] {
			if a.Epoch() != 1 || !bytes.Equal(credential.SigningKey(a), credential.SigningKey(auths[0])) {
				t.Errorf("sidecar %d: epoch %d, same key %v; want epoch 1 and the first sidecar's key",
					i+1, a.Epoch(), bytes.Equal(credential.SigningKey(a), credential.SigningKey(auths[0])))
			}
		}
	})
}

func TestFleetDatabaseHoldsNoPrivateKeyMaterial(t *testing.T) {
	url := pgtest.URL(t)
	kek := newKEK(t)
	f := fleet{url: url}
	a, b := openShared(t, f.sidecar(t), kek), openShared(t, f.sidecar(t), kek)
	mint(t, b, refundClaims())
	keys := []ed25519.PrivateKey{credential.SigningKey(a)}
	if _, err := a.Raise(context.Background()); err != nil {
		t.Fatal(err)
	}
	keys = append(keys, credential.SigningKey(a))

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT bucket, key, value FROM kv`)
	if err != nil {
		t.Fatal(err)
	}
	var dump [][]byte
	sealed := 0
	for rows.Next() {
		var bucket string
		var k, v []byte
		if err := rows.Scan(&bucket, &k, &v); err != nil {
			t.Fatal(err)
		}
		if bucket == "credential_keys" && strings.HasPrefix(string(k), "epoch/") {
			sealed++
		}
		dump = append(dump, []byte(bucket), k, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if sealed != 1 {
		t.Errorf("found %d sealed keys, want 1 (the current epoch's; the revoked one deleted)", sealed)
	}
	all := bytes.Join(dump, []byte{0})
	if bytes.Contains(all, []byte(`"d"`)) {
		t.Error(`the database holds a JWK "d" member`)
	}
	for i, priv := range keys {
		seed := priv.Seed()
		for name, form := range map[string][]byte{
			"raw seed":             seed,
			"raw private key":      priv,
			"base64url seed (d)":   []byte(base64.RawURLEncoding.EncodeToString(seed)),
			"base64 seed":          []byte(base64.StdEncoding.EncodeToString(seed)),
			"hex seed":             []byte(hex.EncodeToString(seed)),
			"the key's first half": seed[:16],
		} {
			if bytes.Contains(all, form) {
				t.Errorf("key %d: the database holds its %s", i, name)
			}
		}
	}
}

func TestFleetRefusesAWrongOrMissingKeyEncryptionKey(t *testing.T) {
	eachFleet(t, func(t *testing.T, f fleet) {
		openShared(t, f.sidecar(t), newKEK(t))

		_, err := credential.Open(credential.Options{Store: f.sidecar(t), KeyEncryptionKey: newKEK(t)})
		if !errors.Is(err, credential.ErrKeyEncryptionKey) || !strings.Contains(err.Error(), "--key-file") {
			t.Errorf("Open with another key-encryption key: %v; want ErrKeyEncryptionKey naming --key-file", err)
		}
		_, err = credential.Open(credential.Options{Store: f.sidecar(t)})
		if !errors.Is(err, credential.ErrInvalidOptions) || !errors.Is(err, credential.ErrKeyEncryptionKey) ||
			!strings.Contains(err.Error(), "countersign keyfile") {
			t.Errorf("Open without a key-encryption key: %v; want ErrInvalidOptions and ErrKeyEncryptionKey saying how to make one", err)
		}
	})
}

func TestFleetSealedKeyDoesNotOpenAsAnotherEpoch(t *testing.T) {
	eachFleet(t, func(t *testing.T, f fleet) {
		kek := newKEK(t)
		db := f.sidecar(t)
		a := openShared(t, db, kek)
		var sealed1 []byte
		if err := db.View(func(tx *store.Tx) (err error) {
			sealed1, err = tx.SealedCredentialKey(1)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		// Someone with write access to the database moves epoch 1's
		// sealed key to epoch 2, hoping to revive a revoked key.
		if err := db.Update(func(tx *store.Tx) error { return tx.PutCredentialKey(2, sealed1) }); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Mint(context.Background(), refundClaims()); !errors.Is(err, credential.ErrKeyEncryptionKey) {
			t.Errorf("Mint after the move: %v; want ErrKeyEncryptionKey", err)
		}
		if _, err := a.JWKSJSON(); err == nil {
			t.Error("JWKSJSON after the move succeeded; want an error rather than a stale key")
		}
		if _, err := credential.Open(credential.Options{Store: f.sidecar(t), KeyEncryptionKey: kek}); !errors.Is(err, credential.ErrKeyEncryptionKey) {
			t.Errorf("Open after the move: %v; want ErrKeyEncryptionKey", err)
		}
	})
}

func TestOptionsRefuseAKeyEncryptionKeyWithoutAStore(t *testing.T) {
	_, err := credential.Open(credential.Options{Dir: t.TempDir(), KeyEncryptionKey: newKEK(t)})
	if !errors.Is(err, credential.ErrInvalidOptions) {
		t.Errorf("Open = %v, want ErrInvalidOptions", err)
	}
}

func TestKeyFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kek")
	if err := credential.WriteKeyFile(path); err != nil {
		t.Fatal(err)
	}
	kek, err := credential.ReadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprint(kek); strings.Contains(s, "=") {
		t.Errorf("a key prints as %q", s)
	}
	if err := credential.WriteKeyFile(path); !errors.Is(err, credential.ErrKeyEncryptionKey) {
		t.Errorf("WriteKeyFile over an existing file = %v, want ErrKeyEncryptionKey", err)
	}
	// The file written is what another sidecar reads: a store sealed
	// through one read of it opens through another.
	db, err := store.Open(filepath.Join(t.TempDir(), "state.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	openShared(t, db, kek)
	again, err := credential.ReadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	openShared(t, db, again)
}

func TestParseKeyEncryptionKey(t *testing.T) {
	b32 := bytes.Repeat([]byte{7}, 32)
	for _, c := range []struct {
		name, text string
		ok         bool
	}{
		{"32 bytes of base64 with a newline", base64.StdEncoding.EncodeToString(b32) + "\n", true},
		{"hex is not base64 of 32 bytes", hex.EncodeToString(b32), false},
		{"31 bytes", base64.StdEncoding.EncodeToString(b32[:31]), false},
		{"base64url without padding", base64.RawURLEncoding.EncodeToString(b32), false},
		{"empty", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := credential.ParseKeyEncryptionKey([]byte(c.text))
			if (err == nil) != c.ok {
				t.Fatalf("err = %v, want ok %v", err, c.ok)
			}
			if err != nil && (!errors.Is(err, credential.ErrKeyEncryptionKey) || !strings.Contains(err.Error(), "countersign keyfile")) {
				t.Errorf("error %v does not say how to make a key file", err)
			}
		})
	}
}

// When the store cannot be read, a sidecar on it neither mints nor
// publishes: the key it holds may have been revoked meanwhile.
func TestFleetFailsClosedWhenTheStoreCannotBeRead(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "state.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := openShared(t, db, newKEK(t))
	srv := httptest.NewServer(a.JWKSHandler())
	defer srv.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Mint(context.Background(), refundClaims()); !errors.Is(err, credential.ErrKeyStore) {
		t.Errorf("Mint on a closed store: %v, want ErrKeyStore", err)
	}
	if _, err := a.JWKSJSON(); !errors.Is(err, credential.ErrKeyStore) {
		t.Errorf("JWKSJSON on a closed store: %v, want ErrKeyStore", err)
	}
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("JWKS on a closed store: %d, want 503", resp.StatusCode)
	}
}

// A caller that read the store's current epoch in its own transaction
// mints without Mint reading it again (a closed store cannot be read, and
// the token is minted); an epoch it read that is newer than the one the
// sidecar mints with makes Mint read the store and mint with the new key.
func TestMintTrustsAnEpochTheCallerReadOnlyWhenItIsTheCurrentOne(t *testing.T) {
	eachFleet(t, func(t *testing.T, f fleet) {
		kek := newKEK(t)
		a, b := openShared(t, f.sidecar(t), kek), openShared(t, f.sidecar(t), kek)
		if _, err := b.Raise(context.Background()); err != nil {
			t.Fatal(err)
		}
		tok, err := a.Mint(credential.WithEpochRead(context.Background(), 2), refundClaims())
		if err != nil || tokenKid(t, tok) != "epoch-2" {
			t.Fatalf("Mint with epoch 2 read while the sidecar minted with 1: kid %q, %v; want epoch-2", tokenKid(t, tok), err)
		}
	})
	db, err := store.Open(filepath.Join(t.TempDir(), "state.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := openShared(t, db, newKEK(t))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Mint(credential.WithEpochRead(context.Background(), 1), refundClaims()); err != nil {
		t.Errorf("Mint with the current epoch read by the caller read the store: %v", err)
	}
	if _, err := a.Mint(credential.WithEpochRead(context.Background(), 0), refundClaims()); !errors.Is(err, credential.ErrKeyStore) {
		t.Errorf("Mint with no epoch read: %v, want ErrKeyStore from its own read", err)
	}
}
