package natstest

import (
	"bytes"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Cutter is a TCP proxy between NATS clients and their server that, once armed, cuts a
// connection right after it passed on a message published to a subject with a given prefix:
// the server takes the message, and its answer is lost with the connection, as when a
// network fails or a load balancer drops a connection at the wrong moment. Clients
// reconnect through it.
type Cutter struct {
	ln       net.Listener
	upstream string
	armed    atomic.Pointer[[]byte] // "PUB <subject prefix>" to cut after, or nil
	cut      chan struct{}          // closed at the cut
	wg       sync.WaitGroup
}

// NewCutter starts a Cutter in front of the NATS server listening at address upstream
// (host:port); it stops when the test ends.
func NewCutter(t testing.TB, upstream string) *Cutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cutter{ln: ln, upstream: upstream, cut: make(chan struct{})}
	c.wg.Go(c.accept)
	t.Cleanup(func() {
		_ = ln.Close()
		c.wg.Wait()
	})
	return c
}

// URL is the NATS URL clients connect to through the cutter.
func (c *Cutter) URL() string { return "nats://" + c.ln.Addr().String() }

// Arm makes the cutter cut the connection that next publishes a message to a subject that
// starts with prefix, once it passed the message on. It cuts once.
func (c *Cutter) Arm(prefix string) {
	marker := []byte("PUB " + prefix)
	c.armed.Store(&marker)
}

// Cut returns a channel closed once the cutter has cut.
func (c *Cutter) Cut() <-chan struct{} { return c.cut }

func (c *Cutter) accept() {
	for {
		client, err := c.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", c.upstream)
		if err != nil {
			_ = client.Close()
			continue
		}
		closeBoth := func() { _ = client.Close(); _ = server.Close() }
		c.wg.Go(func() {
			defer closeBoth()
			_, _ = io.Copy(client, server)
		})
		c.wg.Go(func() {
			defer closeBoth()
			c.forward(client, server)
		})
	}
}

// forward copies what client sends to server until either ends or the cutter cuts.
func (c *Cutter) forward(client, server net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			if _, werr := server.Write(buf[:n]); werr != nil {
				return
			}
			m := c.armed.Load()
			if m != nil && bytes.Contains(buf[:n], *m) && c.armed.CompareAndSwap(m, nil) {
				close(c.cut)
				return
			}
		}
		if err != nil {
			return
		}
	}
}
