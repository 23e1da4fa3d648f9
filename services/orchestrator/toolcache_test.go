package orchestrator

import (
	"testing"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"google.golang.org/protobuf/proto"
)

// TestToolCacheShares: runs that get equal tools share one copy of each; a tool that changed
// is the new one, and the runs after it share that. The list a version names is the last one
// taken with it, and no other.
func TestToolCacheShares(t *testing.T) {
	list := func(desc string) []*typev1.Tool {
		return []*typev1.Tool{{Name: "calculator", Description: "adds"}, {Name: "search", Description: desc}}
	}
	var c toolCache
	if v := c.knownVersion(); v != "" {
		t.Fatalf("an empty cache knows version %q", v)
	}
	first := c.share(list("finds"), "v1")
	second := c.share(list("finds"), "v1")
	for i := range first {
		if first[i] != second[i] {
			t.Errorf("tool %q: a second run got its own copy", first[i].GetName())
		}
	}
	if got, ok := c.ofVersion("v1"); !ok || len(got) != 2 || got[0] != first[0] || got[1] != first[1] {
		t.Errorf("ofVersion(v1) = %v, %v; want the shared list", got, ok)
	}
	changed := c.share(list("finds better"), "v2")
	if changed[0] != first[0] {
		t.Error("the unchanged calculator is not shared")
	}
	if changed[1] == first[1] || changed[1].GetDescription() != "finds better" {
		t.Errorf("the changed search tool is %v, want the new one", changed[1])
	}
	if c.knownVersion() != "v2" {
		t.Errorf("known version %q, want v2", c.knownVersion())
	}
	if _, ok := c.ofVersion("v1"); ok {
		t.Error("the cache answers for a list it no longer holds")
	}
	if again := c.share(list("finds better"), ""); again[1] != changed[1] {
		t.Error("the changed tool is not shared by the next run")
	}
	if _, ok := c.ofVersion(""); ok {
		t.Error("a list without a version is answered as unchanged")
	}
	if !proto.Equal(first[1], list("finds")[1]) {
		t.Error("sharing changed a tool a run holds")
	}
}

// TestToolCacheAnswersForAWhile: a list the action service gave or confirmed answers for it
// for toolsTTL, and not after.
func TestToolCacheAnswersForAWhile(t *testing.T) {
	var c toolCache
	if _, ok := c.recent(); ok {
		t.Fatal("an empty cache answers")
	}
	given := c.share([]*typev1.Tool{{Name: "calculator"}}, "v1")
	got, ok := c.recent()
	if !ok || len(got) != 1 || got[0] != given[0] {
		t.Fatalf("recent() = %v, %v just after the list was given; want it", got, ok)
	}
	c.at = time.Now().Add(-toolsTTL) // the list is a TTL old
	if _, ok := c.recent(); ok {
		t.Error("a list a TTL old answers for the action service")
	}
	if _, ok := c.ofVersion("v1"); !ok {
		t.Fatal("the action service's confirmation of v1 is not taken")
	}
	if _, ok := c.recent(); !ok {
		t.Error("a list the action service just confirmed does not answer")
	}
}
