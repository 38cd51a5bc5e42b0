package store_test

import (
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"

	"github.com/countersign/countersign/executor/pgtest"
	"github.com/countersign/countersign/executor/store"
)

// proxy forwards loopback TCP connections to addr until cut, which closes
// the listener and every connection: PostgreSQL gone, as a network fault or
// a stopped server would leave it.
type proxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newProxy(t *testing.T, addr string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	t.Cleanup(p.cut)
	return p
}

func (p *proxy) cut() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestPostgresGoneIsErrUnavailable: once PostgreSQL cannot be reached,
// reads and writes fail with ErrUnavailable (the sidecar's 503
// store_unavailable), not with an error a caller cannot tell from a bug.
func TestPostgresGoneIsErrUnavailable(t *testing.T) {
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	// pgtest's URL names the unix socket's directory; the server listens on
	// loopback TCP at the same port too.
	q := u.Query()
	p := newProxy(t, net.JoinHostPort("127.0.0.1", q.Get("port")))
	host, port, _ := net.SplitHostPort(p.ln.Addr().String())
	q.Set("host", host)
	q.Set("port", port)
	u.RawQuery = q.Encode()
	db := openPostgres(t, u.String())
	put := func(on bool) error {
		return db.Update(func(tx *store.Tx) error { return tx.SetSwitch("issue_refund", on) })
	}
	if err := put(false); err != nil {
		t.Fatalf("write through the proxy: %v", err)
	}

	p.cut()
	if err := put(true); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("write with PostgreSQL gone: %v, want ErrUnavailable", err)
	}
	err = db.View(func(tx *store.Tx) error { tx.Switch("issue_refund"); return nil })
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("read with PostgreSQL gone: %v, want ErrUnavailable", err)
	}
	t.Logf("the answer a caller gets: %v", err)
}
