package orders

import (
	"fmt"
	"net/http"

	bolt "go.etcd.io/bbolt"

	"github.com/countersign/countersign/executor/clock"
	"github.com/countersign/countersign/executor/sim/fault"
	"github.com/countersign/countersign/executor/sim/simserver"
)

// Audience is the aud an actor token must carry for the order system.
const Audience = "orders"

// Scopes of the order system's operations.
const (
	ScopeLookup = "lookup"
	ScopeReship = "reship"
)

// FileName is the bbolt file kept under Options.DataDir.
const FileName = "orders.db"

// Faults are the order system's fault counters (see package fault);
// WrongAmount must be zero here.
type Faults = fault.Faults

// Options configure an order system: the options every simulated system
// takes (see package simserver; its file is DataDir/orders.db) and the
// seed orders.
type Options struct {
	simserver.Options
	// Orders seed a newly created file. A file that already exists keeps
	// its orders.
	Orders []Order
	// NoReferenceKey ships on every accepted reship request, even under a
	// reference already shipped, as the order system did before a
	// reference was its idempotency key. It exists ONLY for the tests
	// that remove that control (engine.Controls.ReferenceKeys); the sim
	// command has no flag for it.
	NoReferenceKey bool
}

// Server is the order system: an http.Handler over a bbolt file.
type Server struct {
	*simserver.Server // ServeHTTP, Serve, Close, SetFaults, Faults
	core              *simserver.Core
	noReferenceKey    bool
}

var _ http.Handler = (*Server)(nil)

// Open opens (creating and seeding if needed) the order system in
// o.DataDir.
func Open(o Options) (*Server, error) {
	// Seed orders added without dates are dated when the file is seeded,
	// and checked as they will be stored.
	seeded := clock.Clock(clock.Wall{})
	if o.Clock != nil {
		seeded = o.Clock
	}
	now := seeded.Now()
	srv, core, err := simserver.Open(o.Options, simserver.Spec{
		Name:     "orders",
		Title:    "order system",
		FileName: FileName,
		Validate: func() error {
			for _, ord := range o.Orders {
				if err := ord.dated(now).validate(); err != nil {
					return fmt.Errorf("orders: Options.Orders: %w", err)
				}
			}
			return nil
		},
		Init:          func(tx *bolt.Tx) error { return initialize(tx, o.Orders, now) },
		NoWrongAmount: true,
	})
	if err != nil {
		return nil, err
	}
	s := &Server{Server: srv, core: core, noReferenceKey: o.NoReferenceKey}
	s.routes()
	return s, nil
}
