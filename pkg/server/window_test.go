package server_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"

	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	"github.com/agentmesh/agentmesh/pkg/dial"
)

// TestHopsSendNoPings: a client of pkg/dial calling a server of this package, one call after
// another, sends no HTTP/2 PING either way: with the mesh's fixed flow-control windows gRPC
// does not estimate the bandwidth-delay product, which otherwise pings the peer after data
// arrives, for nearly every call (a ping and its ack, each a write of its own). The frames are
// read off the wire by a relay between the two.
func TestHopsSendNoPings(t *testing.T) {
	relay := startFrameRelay(t, intentServer(t, nil))
	defer relay.close()

	conn, err := dial.New(relay.addr())
	if err != nil {
		t.Fatal(err)
	}
	client := intentv1.NewIntentServiceClient(conn)
	req := &intentv1.ParseRequest{Message: "What is 6 times 7?", UserId: "user-1", RunId: "run-1"}
	const calls = 20
	for range calls {
		if _, err := client.Parse(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	relay.close()
	if relay.data.Load() < 2*calls {
		t.Fatalf("the relay saw %d DATA frames for %d calls: it did not read the frames", relay.data.Load(), calls)
	}
	if n := relay.pings.Load(); n > 0 {
		t.Errorf("%d PING frames over %d calls, want none", n, calls)
	}
}

// frameRelay relays one TCP connection to a server and counts the HTTP/2 frames that pass
// either way.
type frameRelay struct {
	lis         net.Listener
	wg          sync.WaitGroup
	mu          sync.Mutex
	conns       []net.Conn
	pings, data atomic.Int64
}

// startFrameRelay listens on loopback and relays the first connection it accepts to target.
func startFrameRelay(t *testing.T, target string) *frameRelay {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &frameRelay{lis: lis}
	r.wg.Go(func() {
		in, err := lis.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", target)
		if err != nil {
			_ = in.Close()
			return
		}
		r.mu.Lock()
		r.conns = append(r.conns, in, out)
		r.mu.Unlock()
		r.wg.Go(func() { r.pipe(out, in, false) })
		r.pipe(in, out, true)
	})
	return r
}

func (r *frameRelay) addr() string { return r.lis.Addr().String() }

// pipe copies src to dst and counts the frames of what it copies; the client's side starts
// with the HTTP/2 preface.
func (r *frameRelay) pipe(dst, src net.Conn, fromServer bool) {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		br := bufio.NewReader(pr)
		if !fromServer {
			if _, err := io.ReadFull(br, make([]byte, len(http2.ClientPreface))); err != nil {
				return
			}
		}
		fr := http2.NewFramer(nil, br)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				_, _ = io.Copy(io.Discard, br)
				return
			}
			switch f.(type) {
			case *http2.PingFrame:
				r.pings.Add(1)
			case *http2.DataFrame:
				r.data.Add(1)
			}
		}
	}()
	_, err := io.Copy(io.MultiWriter(dst, pw), src)
	pw.CloseWithError(errors.Join(err, io.EOF))
	<-done
	_ = dst.Close()
}

// close stops the relay and waits for its goroutines.
func (r *frameRelay) close() {
	_ = r.lis.Close()
	r.mu.Lock()
	for _, c := range r.conns {
		_ = c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}
