package grpctest

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// FreeAddr returns a loopback address no one listens on (FreePort's), for a server a test
// starts later, possibly in another process.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t)))
}

// FreePort returns a loopback port nothing listens on and no earlier call returned, below the
// kernel's range of ephemeral ports. A port is free when it is picked, not when its server
// starts, and the kernel hands the ports of that range to the local ends of connections and to
// listeners on port 0: a port picked there (by listening on port 0) was taken now and then
// before its server listened, by another test's connection or listener ("address already in
// use": TestDevServesMetrics failed so in CI), and a service restarted on its port (a replica
// killed and started again) found it taken the same way. Below the range only a listener on
// that very port takes it. Two picks of one test process drew the same port now and then, so
// a port is never handed out twice.
func FreePort(t testing.TB) int {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	const lowest = 10000
	if top := ephemeralLow(); top > lowest {
		for range 100 {
			port := lowest + rand.IntN(top-lowest)
			if handedOut.ports[port] {
				continue
			}
			lis, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err != nil {
				continue // taken
			}
			_ = lis.Close()
			handedOut.ports[port] = true
			return port
		}
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	port := lis.Addr().(*net.TCPAddr).Port
	handedOut.ports[port] = true
	return port
}

// handedOut is the ports FreePort returned.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// ephemeralLow is the lowest port of the kernel's ephemeral range (Linux's
// ip_local_port_range), or 32768, its usual value, where the kernel does not say.
func ephemeralLow() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return 32768
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil {
		return 32768
	}
	return low
}
