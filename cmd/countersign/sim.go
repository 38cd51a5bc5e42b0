package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/sim/actorcheck"
	"github.com/countersign/countersign/executor/sim/fault"
	"github.com/countersign/countersign/executor/sim/ledger"
	"github.com/countersign/countersign/executor/sim/orders"
	"github.com/countersign/countersign/executor/sim/simserver"
)

// simServer is what the sim command needs of either system of record.
type simServer interface {
	Serve(net.Listener) error
	Close() error
	SetFaults(fault.Faults) error
}

var (
	_ simServer = (*ledger.Server)(nil)
	_ simServer = (*orders.Server)(nil)
)

func newSimCmd() *cobra.Command {
	var (
		listen, data, jwks, ordersURL string
		maxAge                        time.Duration
		faults                        fault.Faults
	)
	cmd := &cobra.Command{
		Use:   "sim ledger|orders --data DIR --jwks URL",
		Short: "Run the simulated ledger or order system alone",
		Long: `Run one simulated system of record until SIGINT or SIGTERM.

It verifies every actor token against the sidecar's JWKS (--jwks, the
sidecar's /.well-known/jwks.json), re-fetched when older than --jwks-max-age
(0: on every request) and when a token names an unknown kid. State is kept
in DIR/ledger.db or DIR/orders.db, so a restart finds it as it was; the order
system is seeded with the Quillfeather orders the first time.

Fault flags (never on by default) inject what the crash matrix and
reconciliation need; they can be changed later with PUT /_sim/faults.`,
		Example: `  countersign sim ledger --listen 127.0.0.1:7402 --data /tmp/cs/ledger --jwks http://127.0.0.1:7400/.well-known/jwks.json --orders http://127.0.0.1:7403
  countersign sim orders --data /tmp/cs/orders --jwks http://127.0.0.1:7400/.well-known/jwks.json --lose-response 1`,
		Args:      cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		ValidArgs: []string{"ledger", "orders"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if data == "" || jwks == "" {
				return errors.New("--data DIR and --jwks URL are required (the sidecar's /.well-known/jwks.json)")
			}
			if maxAge < 0 {
				return fmt.Errorf("--jwks-max-age %v is negative; 0 re-fetches on every request", maxAge)
			}
			log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			var (
				srv simServer
				err error
			)
			switch args[0] {
			case "ledger":
				srv, err = ledger.Open(ledger.Options{Options: simserver.Options{DataDir: data, JWKSURL: jwks, JWKSMaxAge: maxAge, Logger: log}, OrdersURL: ordersURL})
			case "orders":
				if faults.WrongAmount != 0 {
					return errors.New("--wrong-amount applies to the ledger only")
				}
				srv, err = orders.Open(orders.Options{Options: simserver.Options{DataDir: data, JWKSURL: jwks, JWKSMaxAge: maxAge, Logger: log}, Orders: devstack.FixtureOrders(time.Now())})
			}
			if err != nil {
				return err
			}
			if err := srv.SetFaults(faults); err != nil {
				_ = srv.Close()
				return err
			}
			l, err := net.Listen("tcp", listen)
			if err != nil {
				_ = srv.Close()
				return fmt.Errorf("--listen %s: %w", listen, err)
			}
			served := make(chan error, 1)
			go func() { served <- srv.Serve(l) }()
			fmt.Fprintf(cmd.OutOrStdout(), "%s listening on http://%s\n", args[0], l.Addr())
			log.Info("simulator started", "system", args[0], "addr", l.Addr().String(), "data", data,
				"jwks", jwks, "jwks_max_age", maxAge.String(), "faults", faults)
			select {
			case <-cmd.Context().Done():
				log.Info("shutting down", "system", args[0])
				return srv.Close()
			case err := <-served:
				return errors.Join(err, srv.Close())
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:0", "listen address (port 0 picks a free port; the address is printed)")
	f.StringVar(&data, "data", "", "data directory for the bbolt file")
	f.StringVar(&jwks, "jwks", "", "URL of the sidecar's JWKS")
	f.StringVar(&ordersURL, "orders", "", "ledger: base URL of the order system, where line-item refunds are booked (without it the ledger refunds by amount only)")
	f.DurationVar(&maxAge, "jwks-max-age", actorcheck.DefaultMaxAge, "re-fetch the JWKS when the cached copy is older (0: every request)")
	f.IntVar(&faults.LoseResponse, "lose-response", 0, "commit the next N writes, then drop the connection without answering")
	f.IntVar(&faults.DelayMS, "delay-ms", 0, "wait this many milliseconds before answering every request")
	f.IntVar(&faults.DelayWritesMS, "delay-writes-ms", 0, "wait this many milliseconds more before answering every write (POST)")
	f.IntVar(&faults.LoseWrite, "lose-write", 0, "acknowledge the next N writes with 201 but keep nothing")
	f.IntVar(&faults.WrongAmount, "wrong-amount", 0, "ledger: record amount/10 for the next N refunds")
	return cmd
}
