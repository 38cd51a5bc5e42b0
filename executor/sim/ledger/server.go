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
// (see package simserver; its file is DataDir/ledger.db) and where the
// order system is.
type Options struct {
	simserver.Options
	// OrdersURL is the order system's base URL, http://host:port. A
	// line-item refund is booked there against the order's line before
	// its entry is made; without it the ledger refuses line-item refunds
	// (503 line_check_unavailable) and takes refunds by amount only.
	OrdersURL string
	// OrdersClient carries the bookings. Nil means a client with a 10 s
	// timeout.
	OrdersClient *http.Client
}

// Server is the ledger: an http.Handler over a bbolt file.
type Server struct {
	*simserver.Server // ServeHTTP, Serve, Close, SetFaults, Faults
	core              *simserver.Core
	lines             *lineBook // nil without Options.OrdersURL
}

var _ http.Handler = (*Server)(nil)

// Open opens (creating if needed) the ledger in o.DataDir. Serve it with
// Serve or mount it as an http.Handler; Close releases the file.
func Open(o Options) (*Server, error) {
	srv, core, err := simserver.Open(o.Options, simserver.Spec{Name: "ledger", Title: "ledger", FileName: FileName, Init: createBuckets})
	if err != nil {
		return nil, err
	}
	s := &Server{Server: srv, core: core}
	if o.OrdersURL != "" {
		s.lines = newLineBook(o.OrdersURL, o.OrdersClient)
	}
	s.routes()
	return s, nil
}
