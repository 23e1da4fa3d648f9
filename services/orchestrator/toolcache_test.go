package orchestrator

import (
	"testing"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"google.golang.org/protobuf/proto"
)

// TestToolCacheShares: runs that get equal tools share one copy of each; a tool that changed
// is the new one, and the runs after it share that.
func TestToolCacheShares(t *testing.T) {
	list := func(desc string) []*typev1.Tool {
		return []*typev1.Tool{{Name: "calculator", Description: "adds"}, {Name: "search", Description: desc}}
	}
	var c toolCache
	first := c.share(list("finds"))
	second := c.share(list("finds"))
	for i := range first {
		if first[i] != second[i] {
			t.Errorf("tool %q: a second run got its own copy", first[i].GetName())
		}
	}
	changed := c.share(list("finds better"))
	if changed[0] != first[0] {
		t.Error("the unchanged calculator is not shared")
	}
	if changed[1] == first[1] || changed[1].GetDescription() != "finds better" {
		t.Errorf("the changed search tool is %v, want the new one", changed[1])
	}
	if again := c.share(list("finds better")); again[1] != changed[1] {
		t.Error("the changed tool is not shared by the next run")
	}
	if !proto.Equal(first[1], list("finds")[1]) {
		t.Error("sharing changed a tool a run holds")
	}
}
