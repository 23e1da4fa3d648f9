package bufpool

import (
	"testing"

	"google.golang.org/grpc/mem"
)

func TestInstalledAsGRPCsDefault(t *testing.T) {
	if mem.DefaultBufferPool() != pool {
		t.Fatal("gRPC's default buffer pool is not bufpool's")
	}
}

func TestGetTakesTheSmallestTierThatHoldsTheSize(t *testing.T) {
	p := newTiered()
	for _, c := range []struct{ size, cap int }{
		{0, 256}, {1, 256}, {256, 256}, {257, 4096}, {4096, 4096}, {4097, 16384},
		{16385, 32768}, {32768, 32768}, {32769, 1 << 20}, {1 << 20, 1 << 20}, {1<<20 + 1, 1<<20 + 1},
	} {
		buf := p.Get(c.size)
		if len(*buf) != c.size || cap(*buf) != c.cap {
			t.Errorf("Get(%d): len %d cap %d, want len %d cap %d", c.size, len(*buf), cap(*buf), c.size, c.cap)
		}
		p.Put(buf)
	}
}

func TestPutKeepsOnlyTheTiersBuffers(t *testing.T) {
	p := newTiered()
	odd := make([]byte, 100, 300)
	p.Put(&odd) // not a tier's capacity: dropped, never handed out as a 256-byte buffer
	for range 10 {
		if buf := p.Get(200); cap(*buf) != 256 {
			t.Fatalf("Get(200) has capacity %d, want 256", cap(*buf))
		}
	}
	huge := make([]byte, 2<<20)
	p.Put(&huge)
	if buf := p.Get(2 << 20); &(*buf)[0] == &huge[0] {
		t.Error("a buffer above the largest tier was kept")
	}
}

func TestAReusedBufferIsNotCleared(t *testing.T) {
	p := newTiered()
	// sync.Pool may drop what it holds at any time (a collection, or at random under -race):
	// try until one buffer comes back.
	for range 1000 {
		buf := p.Get(4000)
		(*buf)[0] = 7
		p.Put(buf)
		again := p.Get(10)
		if again == buf {
			if cap(*again) != 4096 || len(*again) != 10 || (*again)[0] != 7 {
				t.Fatalf("reused buffer: len %d cap %d first byte %d", len(*again), cap(*again), (*again)[0])
			}
			return
		}
	}
	t.Skip("sync.Pool never handed a buffer back")
}
