package assembly_test

import (
	"fmt"
	"strings"
	"testing"

	contextv1 "github.com/agentmesh/agentmesh/gen/agentmesh/context/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/recall"
	"github.com/agentmesh/agentmesh/pkg/tokens"
	"github.com/agentmesh/agentmesh/services/assembly"
)

// TestRecalledMemoriesFit: choosing which of a turn's recalled memories fit counts each
// memory's line once, not the message again with each memory. Each memory was rendered and
// counted with every one kept before it: 100 memories of 32 KiB of which 99 fit took 7.4 s
// under the race detector (0.55 s without), on every turn (with a BPE tokenizer, 100
// memories of 32 KiB of which 42 fit took 55 s without it). BenchmarkRecalledFit measures how
// the cost grows.
func TestRecalledMemoriesFit(t *testing.T) {
	req := recalledRequest(recall.MaxHits)
	resp, err := newClient(t, assembly.Options{}).Assemble(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if n, want := len(resp.GetSources()), len(req.GetRecalled())-1; n != want {
		t.Errorf("%d memories shown, want %d: all but the last fit", n, want)
	}
}

// recalledRequest asks to assemble a turn with n recalled memories of 32 KiB, room for all but
// the last.
func recalledRequest(n int) *contextv1.AssembleRequest {
	hits := make([]*memoryv1.MemoryHit, n)
	var room int64
	for i := range hits {
		size := 32 << 10
		var b strings.Builder
		for j := 0; b.Len() < size-32; j++ {
			fmt.Fprintf(&b, "fact %d of memory %d. ", j, i)
		}
		hits[i] = &memoryv1.MemoryHit{RelevanceScore: 1 - float64(i)/1000,
			Memory: &memoryv1.Memory{Id: fmt.Sprint("m", i), Content: b.String()}}
		if i < len(hits)-1 {
			room += tokens.Estimate(b.String()) + 2 // and its line's "\n[n] "
		}
	}
	return &contextv1.AssembleRequest{History: []*typev1.Message{usr("U", 4)},
		MaxTokens: room + 20, Recalled: hits}
}

// BenchmarkRecalledFit is the assembly of a turn with a tenth of the most recalled memories
// and with the most (recalledRequest). The choice of those that fit is linear in them, so the
// larger costs about ten times the smaller (a hundred times before). Compare them with
// benchstat's ratio, not a timing assertion.
func BenchmarkRecalledFit(b *testing.B) {
	svc := assembly.New(assembly.Options{})
	for _, n := range []int{recall.MaxHits / 10, recall.MaxHits} {
		req := recalledRequest(n)
		b.Run(fmt.Sprintf("memories=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := svc.Assemble(b.Context(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
