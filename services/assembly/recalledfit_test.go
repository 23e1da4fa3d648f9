package assembly_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	contextv1 "github.com/agentmesh/agentmesh/gen/agentmesh/context/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/tokens"
	"github.com/agentmesh/agentmesh/services/assembly"
)

// TestRecalledMemoriesFitQuickly: choosing which of a turn's recalled memories fit counts each
// memory's line once, not the message again with each memory. Each memory was rendered and
// counted with every one kept before it: 100 memories of 32 KiB of which 99 fit took 7.4 s
// under the race detector (0.55 s without), on every turn (with a BPE tokenizer, 100
// memories of 32 KiB of which 42 fit took 55 s without it). The deadline is far more than
// assembling takes (0.5 s under the race detector).
func TestRecalledMemoriesFitQuickly(t *testing.T) {
	hits := make([]*memoryv1.MemoryHit, assembly.MaxRecalled)
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
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	resp, err := newClient(t, assembly.Options{}).Assemble(ctx, &contextv1.AssembleRequest{
		History: []*typev1.Message{usr("U", 4)}, MaxTokens: room + 20,
		Recalled: hits})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(resp.GetSources()); n != len(hits)-1 {
		t.Errorf("%d memories shown, want %d: all but the last fit", n, len(hits)-1)
	}
}
