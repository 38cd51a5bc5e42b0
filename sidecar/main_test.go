package sidecar_test

import (
	"testing"

	"github.com/countersign/countersign/executor/pgtest"
)

// TestMain stops the PostgreSQL server that tests running on both stores
// start (pgtest).
func TestMain(m *testing.M) { pgtest.Main(m) }
