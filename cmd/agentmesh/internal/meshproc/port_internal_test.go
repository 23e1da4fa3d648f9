package meshproc

import "testing"

// TestFreePortNeverRepeats: ports are picked before their services listen, so freePort must
// not hand one out twice (two services of one mesh drew the same port, and one failed).
func TestFreePortNeverRepeats(t *testing.T) {
	seen := map[int]bool{}
	for range 500 {
		port := freePort(t)
		if seen[port] {
			t.Fatalf("port %d handed out twice", port)
		}
		seen[port] = true
	}
}
