package auth

import (
	"net"
	"testing"
	"time"
)

// nopConn is a connection whose reads and writes do nothing, and allocate nothing.
type nopConn struct{ net.Conn }

func (nopConn) Read(b []byte) (int, error)  { return len(b), nil }
func (nopConn) Write(b []byte) (int, error) { return len(b), nil }
func (nopConn) Close() error                { return nil }

// TestAHeldConnectionCostsACallNothing: without CRLs the connections of ClientCredentials are
// TLS's own; with CRLs, held, their reads and writes (all that a call does on them: nothing is
// checked per call) allocate nothing more than the connection's own.
func TestAHeldConnectionCostsACallNothing(t *testing.T) {
	if _, held := (&MeshTLS{}).ClientCredentials().(*heldServers); held {
		t.Error("the connections of a MeshTLS without CRLs are held")
	}
	h := newHolds(nil, &crls{current: func() *revocations { return nil }, untilCheck: func() time.Duration { return time.Hour }})
	c := h.holdConn(nopConn{}, nil)
	defer c.Close()
	buf := make([]byte, 512)
	if n := testing.AllocsPerRun(100, func() {
		if _, err := c.Write(buf); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("a read and a write of a held connection allocate %v times, want none", n)
	}
}
