package pgtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/executor/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// Each URL is a database of its own: what one test writes, another does
// not see.
func TestEachURLIsAnEmptyDatabaseOfItsOwn(t *testing.T) {
	ctx := context.Background()
	connect := func(url string) *pgx.Conn {
		t.Helper()
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(ctx) })
		return c
	}
	a, b := connect(pgtest.URL(t)), connect(pgtest.URL(t))
	if _, err := a.Exec(ctx, `CREATE TABLE mine (n int); INSERT INTO mine VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := a.QueryRow(ctx, `SELECT n FROM mine`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("read back %d, %v", n, err)
	}
	var tables int
	if err := b.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE tablename = 'mine'`).Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("the other database has %d tables named mine (%v), want 0", tables, err)
	}
}
