package natstest

import (
	"bytes"
	"net"
	"strconv"
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
		var severed atomic.Bool // set before the armed message goes on: no answer comes back
		c.wg.Go(func() {
			defer closeBoth()
			relay(client, server, &severed)
		})
		c.wg.Go(func() {
			defer closeBoth()
			c.forward(client, server, &severed)
		})
	}
}

// relay copies what server sends to client until either ends, dropping all it reads once
// severed is set.
func relay(client, server net.Conn, severed *atomic.Bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 && !severed.Load() {
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// forward copies what client sends to server until either ends or the cutter cuts: once the
// armed message starts, it sets severed, passes the message on to its last byte (its payload
// may come in later reads) and nothing after it, and cuts.
func (c *Cutter) forward(client, server net.Conn, severed *atomic.Bool) {
	buf := make([]byte, 64<<10)
	var msg []byte // the armed message so far, from its first byte
	for {
		n, err := client.Read(buf)
		chunk := buf[:n]
		if msg == nil {
			if m := c.armed.Load(); m != nil {
				if i := bytes.Index(chunk, *m); i >= 0 && c.armed.CompareAndSwap(m, nil) {
					severed.Store(true)
					if _, werr := server.Write(chunk[:i]); werr != nil {
						return
					}
					msg, chunk = []byte{}, chunk[i:]
				}
			}
		}
		if msg != nil {
			// Pass the message on as it comes, and none of what follows it.
			sent := len(msg)
			msg = append(msg, chunk...)
			end := messageEnd(msg)
			if end > 0 {
				chunk = msg[sent:end]
			}
			if _, werr := server.Write(chunk); werr != nil || end > 0 {
				close(c.cut)
				return
			}
		} else if _, werr := server.Write(chunk); werr != nil {
			return
		}
		if err != nil {
			return
		}
	}
}

// messageEnd returns the length of the PUB or HPUB message msg starts with, whose header's
// last field is the size of what follows it, or 0 while msg holds less than the whole message.
func messageEnd(msg []byte) int {
	line, _, ok := bytes.Cut(msg, []byte("\r\n"))
	if !ok {
		return 0
	}
	fields := bytes.Fields(line)
	size, err := strconv.Atoi(string(fields[len(fields)-1]))
	if err != nil {
		return len(line) + 2 // not a message this cutter knows: cut after its line
	}
	if end := len(line) + 2 + size + 2; len(msg) >= end {
		return end
	}
	return 0
}
