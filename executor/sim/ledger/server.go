package ledger

import (
	"net/http"

	"github.com/countersign/countersign/executor/sim/fault"
	"github.com/countersign/countersign/executor/sim/simserver"
)

// Audience is the aud an actor token must carry for the ledger.
const Audience = "ledger"

// Scopes of the ledger's operations.
const (
	ScopeRefund  = "refund"
	ScopeReverse = "reverse"
)

// FileName is the bbolt file the ledger keeps under Options.DataDir.
const FileName = "ledger.db"

// Faults are the ledger's fault counters (see package fault).
type Faults = fault.Faults

// Options configure a ledger: the options every simulated system takes
// (see package simserver); its file is DataDir/ledger.db.
type Options = simserver.Options

// Server is the ledger: an http.Handler over a bbolt file.
type Server struct {
	*simserver.Server // ServeHTTP, Serve, Close, SetFaults, Faults
	core              *simserver.Core
}

var _ http.Handler = (*Server)(nil)

// Open opens (creating if needed) the ledger in o.DataDir. Serve it with
// Serve or mount it as an http.Handler; Close releases the file.
func Open(o Options) (*Server, error) {
	srv, core, err := simserver.Open(o, simserver.Spec{Name: "ledger", Title: "ledger", FileName: FileName, Init: createBuckets})
	if err != nil {
		return nil, err
	}
	s := &Server{Server: srv, core: core}
	s.routes()
	return s, nil
}
