package stack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"

	"github.com/countersign/countersign/executor/store"
)

// StoreFile is the sidecar's bbolt file in the data directory.
const StoreFile = "sidecar.db"

// LockFile, in the data directory, is locked (flock) by the sidecar that
// holds the directory when the store is PostgreSQL: there is no bbolt
// file whose lock would tell a second process over the same directory.
const LockFile = "sidecar.lock"

// A Reservation holds what another process can hold: the data directory
// (its store open, PIDFile naming this process) and the sidecar's
// listening socket. Taking both before anything else starts is what lets a
// second process be told in one line which flag to change.
type Reservation struct {
	dir   string
	store *store.DB
	lock  *os.File // LockFile, held with a PostgreSQL store
	pid   bool     // PIDFile written, so Release removes it
	ln    net.Listener
}

// Reserve takes dataDir, with the store in its bbolt file, and the address
// listen (DefaultListen when empty). A directory or address a person must
// change is a *StartError; on any error nothing stays held.
func Reserve(dataDir, listen string) (*Reservation, error) {
	return ReserveStore(context.Background(), dataDir, "", listen)
}

// ReserveStore is Reserve with the store at storeURL, a PostgreSQL URL
// that several sidecars share (its schema created or migrated), or, when
// storeURL is empty, the bbolt file under dataDir. dataDir stays this
// sidecar's own: its PID file, its keys, the dev stack's simulators.
func ReserveStore(ctx context.Context, dataDir, storeURL, listen string) (*Reservation, error) {
	if dataDir == "" {
		return nil, errors.New("stack: a data directory is required")
	}
	if listen == "" {
		listen = DefaultListen
	}
	r := &Reservation{dir: dataDir}
	if err := r.take(ctx, storeURL, listen); err != nil {
		r.Release()
		return nil, err
	}
	return r, nil
}

// take opens the store first: it is what tells a data directory held by
// another process or not writable, before anything listens.
func (r *Reservation) take(ctx context.Context, storeURL, listen string) (err error) {
	if err := r.openStore(ctx, storeURL); err != nil {
		return err
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

// openStore opens the bbolt file under the data directory, whose lock
// holds the directory; or, with storeURL, locks LockFile and then opens
// the PostgreSQL store.
func (r *Reservation) openStore(ctx context.Context, storeURL string) (err error) {
	if storeURL == "" {
		if r.store, err = store.Open(filepath.Join(r.dir, StoreFile), store.Options{}); err != nil {
			return storeError(r.dir, err)
		}
		return nil
	}
	if r.lock, err = lockDir(r.dir); err != nil {
		return storeError(r.dir, err)
	}
	if r.store, err = store.OpenPostgres(ctx, storeURL, store.PostgresOptions{}); err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	return nil
}

// lockDir creates dir and takes LockFile in it, failing at once with
// store.ErrLocked when another process holds it.
func lockDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: %w", store.ErrUnwritable, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", store.ErrUnwritable, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", f.Name(), store.ErrLocked)
		}
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return f, nil
}

// URL is the sidecar's base URL, http://host:port.
func (r *Reservation) URL() string { return "http://" + r.ln.Addr().String() }

// JWKSURL is where the sidecar will publish the keys of its actor tokens:
// what the systems of record verify them against.
func (r *Reservation) JWKSURL() string { return r.URL() + "/.well-known/jwks.json" }

// Release closes the socket, removes PIDFile, closes the store and lets
// LockFile go, in the
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
	if r.lock != nil {
		errs = append(errs, r.lock.Close()) // closing releases the flock
		r.lock = nil
	}
	return errors.Join(errs...)
}
