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
	"github.com/agentmesh/agentmesh/pkg/config"
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

// TestRetrievedDocumentationIsNeverSummarised: a knowledge_search result over the run's
// tool_response_max_bytes reaches the model truncated, its references verbatim, and is not
// summarised by the observation model (seed 002 §4: an answer is grounded only in text the
// retriever provided, cited by its numbered references and files, which a summary rewrites).
func TestRetrievedDocumentationIsNeverSummarised(t *testing.T) {
	const question = "What does the runbook say about restarts?"
	h := startWith(t, nil, func(cfg *config.Config, _ string) {
		cfg.Models.Observation = &config.Target{Provider: "scripted", Model: "summarizer"}
	},
		llmtest.Scenario{Name: "docs", Match: question, Turns: []llmtest.Turn{
			call("knowledge_search", `{"query": "restart"}`), text("Restart one stage at a time [1]."),
		}},
		llmtest.Scenario{Name: "summariser", Match: "[1] *", Turns: []llmtest.Turn{text("Restarts are documented.")}},
	)
	docs := t.TempDir()
	runbook := "# Runbook\n\n" + strings.Repeat("Restart one stage at a time and wait for its health check. ", 8) + "\n"
	if err := os.WriteFile(filepath.Join(docs, "runbook.md"), []byte(runbook), 0o600); err != nil {
		t.Fatal(err)
	}
	mem := memoryv1.NewMemoryServiceClient(dialStage(t, h.mesh.Addr(mesh.Memory)))
	if _, err := memory.IngestDir(auth.OutgoingUser(t.Context(), "erin"), mem, "erin", action.KnowledgeCollection, docs); err != nil {
		t.Fatalf("ingest: %v", err)
	}

	res := h.run(t, &agentv1.RunRequest{Message: question, UserId: "erin", Overrides: &agentv1.RunOverrides{ToolResponseMaxBytes: i64(200)}})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Fatalf("outcome %s %s (%v)", res.GetOutcome(), res.GetExitReason(), res.GetError())
	}
	got := toolMessage(t, res, 0)
	if !strings.HasPrefix(got, "[TRUNCATED] Original size ") || !strings.Contains(got, "\n[1] Runbook — runbook.md (score ") {
		t.Errorf("tool message %q, want the references truncated with seed 000's notice", got)
	}
	for _, r := range h.llm.Requests() {
		if r.Model == "summarizer" {
			t.Errorf("the observation model was asked to summarise the retrieved documentation")
		}
	}
}
