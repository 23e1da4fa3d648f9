package grpctest

import (
	"net"
	"testing"
)

// TestFreePortNeverRepeats: ports are picked before their servers listen, so FreePort must
// not hand one out twice (two services of one mesh drew the same port, and one failed), and
// each is one a server can then listen on, below the kernel's ephemeral range.
func TestFreePortNeverRepeats(t *testing.T) {
	seen := map[int]bool{}
	for range 500 {
		port := FreePort(t)
		if seen[port] {
			t.Fatalf("port %d handed out twice", port)
		}
		seen[port] = true
		if low := ephemeralLow(); port >= low {
			t.Errorf("port %d is in the ephemeral range, from %d", port, low)
		}
	}
	lis, err := net.Listen("tcp", FreeAddr(t))
	if err != nil {
		t.Fatalf("listening on a free address: %v", err)
	}
	_ = lis.Close()
}
