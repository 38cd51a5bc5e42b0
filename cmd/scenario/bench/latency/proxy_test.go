package latency_test

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/cmd/scenario/bench/latency"
)

// echo serves, on a loopback port, a server that writes back what it
// reads and closes its side when the client has closed its own.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func start(t *testing.T, network, address string, roundTrip time.Duration) *latency.Proxy {
	t.Helper()
	p, err := latency.Start(network, address, roundTrip)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close the proxy: %v", err)
		}
	})
	return p
}

func dial(t *testing.T, p *latency.Proxy) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// A megabyte written through the proxy to an echo server and back
// arrives intact and in order, on several connections at once, and the
// client's half close reaches the server after the last byte.
func TestBytesArriveIntactAndInOrder(t *testing.T) {
	p := start(t, "tcp", echo(t), 2*time.Millisecond)
	var wg sync.WaitGroup
	for range 4 {
		want := make([]byte, 1<<20)
		rand.Read(want)
		c := dial(t, p)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var got []byte
			read := make(chan error, 1)
			go func() {
				var err error
				got, err = io.ReadAll(c)
				read <- err
			}()
			for b := want; len(b) > 0; b = b[min(len(b), 1000):] { // many small writes
				if _, err := c.Write(b[:min(len(b), 1000)]); err != nil {
					t.Error(err)
					return
				}
			}
			if err := c.CloseWrite(); err != nil {
				t.Error(err)
				return
			}
			if err := <-read; err != nil {
				t.Error(err)
				return
			}
			if !bytes.Equal(got, want) {
				t.Errorf("got %d bytes back, want the %d sent, unchanged and in order", len(got), len(want))
			}
		}()
	}
	wg.Wait()
}

// A request and its answer take at least the round trip: half of it on
// the way there, half on the way back. Only the lower bound is checked:
// a loaded machine may take any longer.
func TestARequestAndItsAnswerTakeAtLeastTheRoundTrip(t *testing.T) {
	const roundTrip = 20 * time.Millisecond
	p := start(t, "tcp", echo(t), roundTrip)
	c := dial(t, p)
	buf := make([]byte, 5)
	for i := range 3 {
		t0 := time.Now()
		if _, err := c.Write([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(t0); took < roundTrip {
			t.Errorf("request %d answered in %v, want at least %v", i, took, roundTrip)
		}
		if string(buf) != "hello" {
			t.Errorf("request %d answered %q", i, buf)
		}
	}
	if got := p.Counts().RoundTrips; got != 3 {
		t.Errorf("round trips = %d, want 3", got)
	}
}

// Close ends the connections in flight: the client sees its end.
func TestCloseEndsTheConnections(t *testing.T) {
	p, err := latency.Start("tcp", echo(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p)
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("read after Close succeeded, want the connection ended")
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Error("a connection after Close was accepted")
	}
}

func TestANegativeRoundTripIsRefused(t *testing.T) {
	if _, err := latency.Start("tcp", "127.0.0.1:1", -time.Millisecond); err == nil {
		t.Fatal("Start accepted a negative round trip")
	}
}
