package sidecar_test

import (
	"testing"

	"github.com/countersign/countersign/executor/pgtest"
)

// The tests that run a stack on PostgreSQL share one server, started on
// first use and stopped when the tests end; without PostgreSQL's binaries
// they are skipped with a line that names `bash .ci/run`.
func TestMain(m *testing.M) { pgtest.Main(m) }
