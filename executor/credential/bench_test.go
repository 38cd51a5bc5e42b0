package credential_test

import (
	"context"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/pgtest"
	"github.com/countersign/countersign/executor/store"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"
)

func BenchmarkMint(b *testing.B) {
	a := open(b, b.TempDir())
	c := refundClaims()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Mint(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyActorToken measures what a receiver pays per request: jwx
// verification of the signature against the parsed JWKS plus validation of
// exp, iss and aud.
func BenchmarkVerifyActorToken(b *testing.B) {
	a, err := credential.Open(credential.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	tok := []byte(mint(b, a, refundClaims()))
	doc, _ := a.JWKSJSON()
	set, err := jwk.Parse(doc)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	clock := jwt.ClockFunc(func() time.Time { return now })
	b.ReportAllocs()
	for b.Loop() {
		if _, err := jwt.Parse(tok, jwt.WithKeySet(set), jwt.WithClock(clock),
			jwt.WithIssuer(credential.Issuer), jwt.WithAudience("ledger")); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMintSharedStore is Mint on a fleet's keyring on PostgreSQL: the
// signature plus the read of the store's current epoch that comes before
// every token. Compare with BenchmarkMint (keys in files, no read).
func BenchmarkMintSharedStore(b *testing.B) {
	db, err := store.OpenPostgres(context.Background(), pgtest.URL(b), store.PostgresOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	kek, err := credential.NewKeyEncryptionKey()
	if err != nil {
		b.Fatal(err)
	}
	a := openShared(b, db, kek)
	c := refundClaims()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Mint(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
}
