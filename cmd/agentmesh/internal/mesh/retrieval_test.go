package mesh_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/action"
	"github.com/agentmesh/agentmesh/services/memory"
)

// TestKnowledgeSearchNamesTheFile: knowledge_search's numbered references name the file each
// comes from (seed 002 §4: answers cite "the numbered references and filenames provided"). A
// document with a Markdown heading was referenced by its heading alone, so a model told to
// cite filenames had none to cite.
func TestKnowledgeSearchNamesTheFile(t *testing.T) {
	const question = "How are failed calls retried?"
	h := start(t, nil, llmtest.Scenario{Name: "docs", Match: question, Turns: []llmtest.Turn{
		call("knowledge_search", `{"query": "retried backoff jitter"}`), text("With backoff and jitter [1]."),
	}})
	docs := t.TempDir()
	if err := os.MkdirAll(filepath.Join(docs, "ops"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"ops/retry.md": "# Retry policy\n\nFailed calls are retried with exponential backoff and jitter.\n",
		"notes.txt":    "Retried calls wait with backoff and jitter too.\n",
	} {
		if err := os.WriteFile(filepath.Join(docs, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mem := memoryv1.NewMemoryServiceClient(dialStage(t, h.mesh.Addr(mesh.Memory)))
	if _, err := memory.IngestDir(auth.OutgoingUser(t.Context(), "carol"), mem, "carol", action.KnowledgeCollection, docs); err != nil {
		t.Fatalf("ingest: %v", err)
	}

	res := h.run(t, &agentv1.RunRequest{Message: question, UserId: "carol"})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Fatalf("outcome %s %s (%v)", res.GetOutcome(), res.GetExitReason(), res.GetError())
	}
	got := toolMessage(t, res, 0)
	// A document's heading and its file; a file without a heading, whose title is its name,
	// by its file once.
	if !strings.Contains(got, "] Retry policy — ops/retry.md (score ") || !strings.Contains(got, "] notes.txt (score ") {
		t.Errorf("knowledge_search returned %q, want each reference to name its file", got)
	}
}

// TestRulesModelRefusesWithoutDocumentation: the built-in rules model, asked to search the
// documentation, answers a search that finds nothing with seed 002's exact refusal (§3: "I
// don't have enough information in the current documentation to answer that."), not with the
// search's sentinel: it answered "knowledge_search returned DOCUMENTATION_SEARCH_RESULT:
// EMPTY.", a string for the model, as the user's answer.
func TestRulesModelRefusesWithoutDocumentation(t *testing.T) {
	h := start(t, nil) // the built-in rules model
	res := h.run(t, &agentv1.RunRequest{Message: "Search the docs for the validator staking rules", UserId: "dora"})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Fatalf("outcome %s %s (%v)", res.GetOutcome(), res.GetExitReason(), res.GetError())
	}
	if got := toolMessage(t, res, 0); got != action.EmptySearchResult {
		t.Fatalf("knowledge_search returned %q, want the empty sentinel: dora has no documentation", got)
	}
	const refusal = "I don't have enough information in the current documentation to answer that."
	if got := res.GetFinalReport().GetContent(); got != refusal {
		t.Errorf("answer %q, want %q", got, refusal)
	}
}
