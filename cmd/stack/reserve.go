package stack

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/countersign/countersign/executor/store"
)

// StoreFile is the sidecar's bbolt file in the data directory.
const StoreFile = "sidecar.db"

// A Reservation holds what another process can hold: the data directory
// (its store open, PIDFile naming this process) and the sidecar's
// listening socket. Taking both before anything else starts is what lets a
// second process be told in one line which flag to change.
type Reservation struct {
	dir   string
	store *store.DB
	pid   bool // PIDFile written, so Release removes it
	ln    net.Listener
}

// Reserve takes dataDir and the address listen (DefaultListen when empty).
// A directory or address a person must change is a *StartError; on any
// error nothing stays held.
func Reserve(dataDir, listen string) (*Reservation, error) {
	if dataDir == "" {
		return nil, errors.New("stack: a data directory is required")
	}
	if listen == "" {
		listen = DefaultListen
	}
	r := &Reservation{dir: dataDir}
	if err := r.take(listen); err != nil {
		r.Release()
		return nil, err
	}
	return r, nil
}

// take opens the store first: it is what tells a data directory held by
// another process or not writable, before anything listens.
func (r *Reservation) take(listen string) (err error) {
	if r.store, err = store.Open(filepath.Join(r.dir, StoreFile), store.Options{}); err != nil {
		return storeError(r.dir, err)
	}
	if err := recordPID(r.dir); err != nil {
		return storeError(r.dir, fmt.Errorf("%w: %w", store.ErrUnwritable, err))
	}
	r.pid = true
	if r.ln, err = net.Listen("tcp", listen); err != nil {
		return listenError(listen, err)
	}
	return nil
}

// URL is the sidecar's base URL, http://host:port.
func (r *Reservation) URL() string { return "http://" + r.ln.Addr().String() }

// JWKSURL is where the sidecar will publish the keys of its actor tokens:
// what the systems of record verify them against.
func (r *Reservation) JWKSURL() string { return r.URL() + "/.well-known/jwks.json" }

// Release closes the socket, removes PIDFile and closes the store, in the
// reverse order of taking them. It is safe on nil and twice.
func (r *Reservation) Release() error {
	if r == nil {
		return nil
	}
	var errs []error
	if r.ln != nil {
		if err := r.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
		r.ln = nil
	}
	if r.pid {
		if err := os.Remove(filepath.Join(r.dir, PIDFile)); err != nil {
			errs = append(errs, err)
		}
		r.pid = false
	}
	if r.store != nil {
		errs = append(errs, r.store.Close())
		r.store = nil
	}
	return errors.Join(errs...)
}
