// Package bufpool is the buffer pool every gRPC client and server of the mesh takes its
// buffers from: gRPC's tiers (256 bytes, 4, 16 and 32 KiB, 1 MiB) without clearing a buffer
// it hands out again.
//
// gRPC's own pools (google.golang.org/grpc/mem) clear every reused buffer before handing it
// out, in case a caller reads what it did not write; gRPC then overwrites it at once, with a
// message it encodes, a frame it reads or a message it copies. One run at a time that
// clearing was 1.3% of the mesh's CPU (issue 15; grpc-go#8790 measured 3.5% elsewhere), and
// grpc-go keeps its pool that does not clear internal. Importing this package installs the
// pool as gRPC's default (experimental.SetDefaultBufferPool, which must happen before any
// client or server starts: an init function is the only place); pkg/dial imports it, so
// every binary of the mesh has it.
package bufpool

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
)

func init() { experimental.SetDefaultBufferPool(pool) }

// pool is the pool installed as gRPC's default.
var pool mem.BufferPool = newTiered()

// tierShifts are the tiers' sizes as powers of two: gRPC's default tiers. A buffer larger than
// the largest is allocated and left to the collector, so that one huge message does not stay
// in memory.
var tierShifts = [...]uint8{8, 12, 14, 15, 20}

// tiered hands out buffers from the smallest tier that holds the size asked for.
type tiered struct {
	pools [len(tierShifts)]sync.Pool
	// byShift maps ⌈log₂ size⌉ to the index of the smallest tier that holds it, -1 above the
	// largest.
	byShift [64]int8
}

func newTiered() *tiered {
	t := &tiered{}
	tier := 0
	for shift := range t.byShift {
		for tier < len(tierShifts) && int(tierShifts[tier]) < shift {
			tier++
		}
		t.byShift[shift] = -1
		if tier < len(tierShifts) {
			t.byShift[shift] = int8(tier)
		}
	}
	return t
}

// tierOf is the index of the smallest tier that holds size bytes, or -1.
func (t *tiered) tierOf(size int) int {
	if size <= 1 {
		return 0
	}
	return int(t.byShift[bits.Len(uint(size-1))])
}

// Get returns a buffer of length size, with what a previous user wrote in it.
func (t *tiered) Get(size int) *[]byte {
	i := t.tierOf(size)
	if i < 0 {
		b := make([]byte, size)
		return &b
	}
	if buf, ok := t.pools[i].Get().(*[]byte); ok {
		*buf = (*buf)[:size]
		return buf
	}
	b := make([]byte, size, 1<<tierShifts[i])
	return &b
}

// Put returns a buffer Get handed out; a buffer of any other capacity is dropped.
func (t *tiered) Put(buf *[]byte) {
	c := cap(*buf)
	i := t.tierOf(c)
	if i < 0 || 1<<tierShifts[i] != c {
		return
	}
	t.pools[i].Put(buf)
}
