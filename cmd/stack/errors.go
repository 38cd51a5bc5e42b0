package stack

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/countersign/countersign/executor/store"
)

// The reasons a stack cannot start that a person fixes, not the code. Each
// comes as a *StartError; match with errors.Is.
var (
	// ErrAddrInUse: another process listens on the sidecar's address.
	ErrAddrInUse = errors.New("address in use")
	// ErrDataDirLocked: another process holds the data directory's store.
	ErrDataDirLocked = errors.New("data directory in use")
	// ErrDataDirUnwritable: the data directory cannot be created or written.
	ErrDataDirUnwritable = errors.New("data directory not writable")
)

// StartError is a start-up problem in a person's terms: what is wrong and
// where. Its message is one line; a command adds which flag to change.
type StartError struct {
	Kind error  // ErrAddrInUse, ErrDataDirLocked or ErrDataDirUnwritable
	Addr string // ErrAddrInUse: the address asked for
	Dir  string // the data directory
	PID  int    // ErrDataDirLocked: the holder, when it recorded itself; else 0
	Err  error  // the cause
}

func (e *StartError) Error() string {
	switch e.Kind {
	case ErrAddrInUse:
		return fmt.Sprintf("port %s is in use by another process", e.Addr)
	case ErrDataDirLocked:
		holder := "another process"
		if e.PID > 0 {
			holder = fmt.Sprintf("another countersign process (pid %d)", e.PID)
		}
		return fmt.Sprintf("data dir %s is in use by %s", e.Dir, holder)
	}
	return fmt.Sprintf("data dir %s cannot be written (%v)", e.Dir, unwrapPath(e.Err))
}

// Unwrap exposes both the kind and the cause to errors.Is and errors.As.
func (e *StartError) Unwrap() []error { return []error{e.Kind, e.Err} }

// PIDFile, in the data directory, names the process that holds its store,
// so a second process refused the lock can say which one to stop.
const PIDFile = "sidecar.pid"

// listenError classifies a failed listen on addr.
func listenError(addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return &StartError{Kind: ErrAddrInUse, Addr: addr, Err: err}
	}
	return fmt.Errorf("stack: listen for the sidecar on %s: %w", addr, err)
}

// storeError classifies a failed store.Open over dir.
func storeError(dir string, err error) error {
	switch {
	case errors.Is(err, store.ErrLocked):
		return &StartError{Kind: ErrDataDirLocked, Dir: dir, PID: holder(dir), Err: err}
	case errors.Is(err, store.ErrUnwritable):
		return &StartError{Kind: ErrDataDirUnwritable, Dir: dir, Err: err}
	}
	return err
}

// holder reads the pid the store's holder recorded; 0 when unknown.
func holder(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, PIDFile))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// unwrapPath returns the *os.PathError inside err (the operation, the path
// and the reason, all a person needs), or err.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe
	}
	return err
}

// recordPID writes this process's pid into dir for holder to read.
func recordPID(dir string) error {
	return os.WriteFile(filepath.Join(dir, PIDFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600)
}
