package orchestrator

import (
	"testing"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
)

// TestProviderCache: the generation stage's list answers for a contract only while it is fresh
// and names every provider the contract's targets and fallback target name.
func TestProviderCache(t *testing.T) {
	contract := func(fallback string, providers ...string) *typev1.ExecutionContract {
		c := &typev1.ExecutionContract{}
		for _, p := range providers {
			c.Targets = append(c.Targets, &typev1.Target{Provider: p, Model: "m"})
		}
		if fallback != "" {
			c.FallbackTarget = &typev1.Target{Provider: fallback, Model: "m"}
		}
		return c
	}
	var p providerCache
	if p.covers(contract("", "openai")) {
		t.Fatal("an empty cache covers a contract")
	}
	p.take([]string{"anthropic", "openai"})
	for _, tc := range []struct {
		c    *typev1.ExecutionContract
		want bool
	}{
		{contract("", "openai"), true},
		{contract("anthropic", "openai", "anthropic"), true},
		{contract("", "openai", "ollama"), false},
		{contract("ollama", "openai"), false},
	} {
		if got := p.covers(tc.c); got != tc.want {
			t.Errorf("covers(targets %v, fallback %v) = %v, want %v", tc.c.GetTargets(), tc.c.GetFallbackTarget(), got, tc.want)
		}
	}
	p.at = time.Now().Add(-providersTTL) // the list is a TTL old
	if p.covers(contract("", "openai")) {
		t.Error("a stale list covers a contract")
	}
	p.take(nil) // a stage without providers
	if p.covers(contract("", "openai")) {
		t.Error("an empty list covers a contract")
	}
}
