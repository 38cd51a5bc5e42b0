// Package pgtest gives tests a real PostgreSQL: one server per test
// binary, started from Debian's postgresql package on first use (initdb in
// a temporary directory, a free loopback port, its unix socket in the same
// directory), and a new empty database for every test that asks.
//
// A test package that uses it runs its tests through Main:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// and a test calls URL for a postgres:// URL of its own database. Without
// PostgreSQL's binaries URL skips the test with one line that names the
// command that installs them and runs it: `bash .ci/run`.
//
// # Running as root
//
// initdb and postgres refuse to run as root. When the test runs as root
// (CI and the developers' containers do) the server runs as the postgres
// user that the package creates, and its directory is handed to that user.
//
// # Why a package-level server
//
// Starting a server costs about a second (initdb), a new database a few
// milliseconds: the server is shared by the tests of one binary, which is
// what TestMain is for, and stopped when they end. It is the one piece of
// package state, and lives only in test binaries.
package pgtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// SkipMessage is the line a test without PostgreSQL is skipped with.
const SkipMessage = "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): `bash .ci/run` installs it and runs this test"

// FsyncEnv names the environment variable that, set to "on", starts the
// server with fsync on (benchmarks comparing durable commits); tests run
// without it, as nothing they check survives a power cut.
const FsyncEnv = "PGTEST_FSYNC"

var (
	inMain  atomic.Bool
	startMu sync.Mutex
	srv     *server
	dbSeq   atomic.Uint64
)

// Main runs m's tests, then stops the server if one of them started it,
// and exits with their code.
func Main(m *testing.M) {
	inMain.Store(true)
	code := m.Run()
	startMu.Lock()
	if srv != nil {
		if err := srv.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
		}
		srv = nil
	}
	startMu.Unlock()
	os.Exit(code)
}

// URL returns the postgres:// URL of a new, empty database for t, dropped
// when t ends; the caller closes its connections in cleanups registered
// after URL returns (they run first). It starts the binary's server on
// first use, and skips t when PostgreSQL is not installed.
func URL(t testing.TB) string {
	t.Helper()
	url, err := Databases(t)()
	if err != nil {
		t.Fatal(err)
	}
	return url
}

// Databases returns a function that makes a new, empty database each time
// it is called and returns its URL, for code that starts stores of its own
// from goroutines of its own (URL may be called only from t's). The
// databases are dropped when t ends. Like URL it starts the server, or
// skips t when PostgreSQL is not installed.
func Databases(t testing.TB) func() (string, error) {
	t.Helper()
	if !inMain.Load() {
		t.Fatal("pgtest: the server is stopped by pgtest.Main: add `func TestMain(m *testing.M) { pgtest.Main(m) }` to the test package")
	}
	bin, ok := binDir()
	if !ok {
		t.Skip(SkipMessage)
	}
	s, err := shared(bin)
	if err != nil {
		t.Fatalf("pgtest: start PostgreSQL: %v", err)
	}
	var mu sync.Mutex
	var made []string
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, name := range made {
			if _, err := s.admin.Exec(context.Background(), "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
				t.Errorf("pgtest: drop database %s: %v", name, err)
			}
		}
	})
	return func() (string, error) {
		name := fmt.Sprintf("t%d", dbSeq.Add(1))
		if _, err := s.admin.Exec(context.Background(), "CREATE DATABASE "+name); err != nil {
			return "", fmt.Errorf("pgtest: create database: %w", err)
		}
		mu.Lock()
		made = append(made, name)
		mu.Unlock()
		return s.url(name), nil
	}
}

// binDir finds PostgreSQL's server binaries: Debian's newest
// /usr/lib/postgresql/N/bin, else initdb on PATH.
func binDir() (string, bool) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	slices.SortFunc(dirs, func(a, b string) int { return majorOf(a) - majorOf(b) })
	if len(dirs) > 0 {
		return filepath.Dir(dirs[len(dirs)-1]), true
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), true
	}
	return "", false
}

// majorOf is N of /usr/lib/postgresql/N/bin/initdb.
func majorOf(initdb string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return n
}

// shared returns the binary's server, starting it the first time.
func shared(bin string) (*server, error) {
	startMu.Lock()
	defer startMu.Unlock()
	if srv != nil {
		return srv, nil
	}
	s, err := start(bin)
	if err != nil {
		return nil, err
	}
	srv = s
	return s, nil
}

// server is one running postgres.
type server struct {
	dir    string // data, socket and log
	port   int
	proc   *os.Process
	exited chan struct{} // closed when the postgres process has exited
	log    *os.File
	admin  *pgxpool.Pool
}

func (s *server) url(db string) string {
	return fmt.Sprintf("postgres://postgres@/%s?host=%s&port=%d", db, s.dir, s.port)
}

// start runs initdb and postgres and waits until postgres accepts
// connections.
func start(bin string) (s *server, err error) {
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	cred, err := credential(dir)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust",
		"--no-sync", "-E", "UTF8", "--locale=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w: %s", err, lastLines(string(out), 10))
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	fsync := "off"
	if os.Getenv(FsyncEnv) == "on" {
		fsync = "on"
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync="+fsync, "-c", "max_connections=300")
	// Setpgid: a ^C to the test does not reach the server before Main
	// stops it. Pdeathsig: a test binary killed outright takes its server
	// with it (SIGQUIT, PostgreSQL's immediate shutdown).
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGQUIT}
	logf, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		return nil, err
	}
	// An os.Pipe rather than StderrPipe: Wait would close that one under
	// the reader, which keeps copying the log after postgres is ready.
	stderr, w, err := os.Pipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, w
	s = &server{dir: dir, port: port, exited: make(chan struct{}), log: logf}
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the thread that started the child ends:
		// this goroutine keeps its thread until the server has exited.
		runtime.LockOSThread()
		err := cmd.Start()
		w.Close() // the child holds its own copy
		if err != nil {
			stderr.Close()
			started <- err
			return
		}
		started <- nil
		cmd.Wait()
		close(s.exited)
	}()
	if err := <-started; err != nil {
		logf.Close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s.proc = cmd.Process
	if err := waitReady(stderr, logf, s.exited); err != nil {
		s.proc.Signal(syscall.SIGQUIT)
		<-s.exited
		logf.Close()
		log, _ := os.ReadFile(logf.Name())
		return nil, fmt.Errorf("postgres on port %d: %w: %s", port, err, lastLines(string(log), 10))
	}
	if s.admin, err = pgxpool.New(context.Background(), s.url("postgres")); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// waitReady copies postgres's log to logf and returns when it says it is
// ready, or when the process exits first.
func waitReady(stderr io.ReadCloser, logf *os.File, exited <-chan struct{}) error {
	ready := make(chan struct{})
	go func() {
		defer stderr.Close()
		sc := bufio.NewScanner(stderr)
		signalled := false
		for sc.Scan() {
			fmt.Fprintln(logf, sc.Text())
			if !signalled && strings.Contains(sc.Text(), "database system is ready to accept connections") {
				signalled = true
				close(ready)
			}
		}
		io.Copy(logf, stderr) // a line too long for the scanner: keep draining
	}()
	select {
	case <-ready:
		return nil
	case <-exited:
		return errors.New("exited before it was ready")
	case <-time.After(time.Minute):
		return errors.New("not ready after a minute")
	}
}

// stop shuts postgres down (SIGINT: fast shutdown, which disconnects the
// clients) and removes its directory.
func (s *server) stop() error {
	if s.admin != nil {
		s.admin.Close()
	}
	err := s.proc.Signal(syscall.SIGINT)
	<-s.exited
	s.log.Close()
	return errors.Join(err, os.RemoveAll(s.dir))
}

// credential is who the server runs as: as root, the postgres user, who
// is given dir; otherwise the current user (nil).
func credential(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, the server runs as the postgres user, which Debian's postgresql package creates: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// freePort is a loopback port nobody listened on a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
