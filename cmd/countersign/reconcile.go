package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/cmd/stack"
	"github.com/countersign/countersign/executor/dispatch"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/reconcile"
	"github.com/countersign/countersign/executor/sim/ledger"
	"github.com/countersign/countersign/executor/sim/orders"
	"github.com/countersign/countersign/executor/sim/simserver"
	"github.com/countersign/countersign/executor/store"
)

// offlineJWKS satisfies the simulators' Options: this command serves
// neither of them, so no actor token is ever checked and the URL is never
// fetched.
const offlineJWKS = "http://127.0.0.1:1/offline-read-no-tokens-checked"

func newReconcileCmd() *cobra.Command {
	var (
		data   string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "reconcile --data DIR [--json]",
		Short: "Compare the agent's records with the ledger and the order system and classify every difference",
		Long: `Run one reconciliation over the dev data directory of a stopped sidecar.

It reads every step and approval from DIR/sidecar.db, every entry of the
ledger under DIR/ledger and every shipment of the order system under
DIR/orders, trusts no step status on its own, and prints the eight classes
(matched and the seven kinds of difference) with their findings and who may
act on each. It classifies only: nothing is written, no workflow is resumed.

Each bbolt file admits one process at a time, so stop the sidecar first; a
running sidecar answers the same question over its API.

Exit status 0 when the reconciliation ran, whatever it found; 1 when it
could not run.`,
		Example: `  countersign reconcile --data /tmp/cs
  countersign reconcile --data /tmp/cs --json | jq .classes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if data == "" {
				return errors.New("--data DIR is required: the directory countersign serve --dev keeps its state in")
			}
			r, err := reconcileDir(cmd.Context(), data)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, r)
			}
			return r.WriteTable(out)
		},
	}
	cmd.Flags().StringVar(&data, "data", "", "data directory of a stopped countersign serve --dev")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

// reconcileDir opens the dev layout under dir for reading and runs one
// reconciliation.
func reconcileDir(ctx context.Context, dir string) (reconcile.Report, error) {
	job, closeAll, err := offlineJob(dir)
	if err != nil {
		return reconcile.Report{}, err
	}
	defer closeAll()
	return job.Run(ctx)
}

// offlineJob opens the dev layout under dir for reading and returns a
// reconciliation job over it, and what closes it. It opens the
// simulators' files itself rather than starting the dev stack: starting it
// would resume in-flight workflows, dispatching refunds before they could
// be reported.
func offlineJob(dir string) (job *reconcile.Job, closeAll func(), err error) {
	storePath := filepath.Join(dir, stack.StoreFile)
	for _, p := range []string{storePath, filepath.Join(dir, devstack.LedgerDir, ledger.FileName), filepath.Join(dir, devstack.OrdersDir, orders.FileName)} {
		if _, err := os.Stat(p); err != nil {
			return nil, nil, fmt.Errorf("no countersign data at %s (is %s the --data of countersign serve --dev?): %w", p, dir, err)
		}
	}
	var closers []func() error
	cleanup := func() {
		for _, c := range slices.Backward(closers) {
			c()
		}
	}
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	db, err := store.Open(storePath, store.Options{})
	if errors.Is(err, store.ErrLocked) {
		return nil, nil, fmt.Errorf("%w: a sidecar is running over %s; stop it (SIGTERM) and run the command again, "+
			"or ask the running sidecar over its API", err, dir)
	}
	if err != nil {
		return nil, nil, err
	}
	closers = append(closers, db.Close)
	led, err := ledger.Open(ledger.Options{Options: simserver.Options{DataDir: filepath.Join(dir, devstack.LedgerDir), JWKSURL: offlineJWKS}})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: stop any countersign sim ledger over %s", err, dir)
	}
	closers = append(closers, led.Close)
	ord, err := orders.Open(orders.Options{Options: simserver.Options{DataDir: filepath.Join(dir, devstack.OrdersDir), JWKSURL: offlineJWKS}})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: stop any countersign sim orders over %s", err, dir)
	}
	closers = append(closers, ord.Close)
	job, err = reconcile.New(reconcile.Options{
		Records:   reconcile.FromStore(db),
		Ledger:    reconcile.LedgerFunc(func(context.Context) ([]dispatch.Entry, error) { return ledgerEntries(led) }),
		Shipments: reconcile.ShipmentsFunc(func(context.Context) ([]dispatch.Shipment, error) { return allShipments(ord) }),
	})
	if err != nil {
		return nil, nil, err
	}
	return job, cleanup, nil
}

// ledgerEntries reads the ledger's entries through its Go API, in the shape
// its HTTP API answers them.
func ledgerEntries(l *ledger.Server) ([]dispatch.Entry, error) {
	all, err := l.Entries()
	if err != nil {
		return nil, err
	}
	out := make([]dispatch.Entry, 0, len(all))
	for _, e := range all {
		out = append(out, dispatch.Entry{
			ID: e.ID, Kind: string(e.Kind), Order: e.Order, Amount: money.Cents(e.Amount), Key: e.Key,
			By: e.By, Agent: e.Agent, Reverses: e.Reverses, At: e.At,
		})
	}
	return out, nil
}

// allShipments reads every shipment through the order system's Go API.
func allShipments(o *orders.Server) ([]dispatch.Shipment, error) {
	all, err := o.AllShipments()
	if err != nil {
		return nil, err
	}
	out := make([]dispatch.Shipment, 0, len(all))
	for _, s := range all {
		out = append(out, dispatch.Shipment{ID: s.ID, Kind: string(s.Kind), Order: s.Order, By: s.By, Agent: s.Agent, At: s.At})
	}
	return out, nil
}
