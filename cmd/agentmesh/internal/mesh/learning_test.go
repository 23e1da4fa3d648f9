package mesh_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/memory"
	"google.golang.org/grpc/codes"
)

// What the users of the learning tests say.
const (
	tellColour  = "Remember that my favourite colour is green."
	askColour   = "What is my favourite colour?"
	greenFact   = "The user's favourite colour is green."
	learnWithin = 10 * time.Second
)

// learnedBy waits until the memory stage has learned from a run (GetRun shows its learning)
// and returns the run's result.
func learnedBy(t *testing.T, c agentv1.AgentServiceClient, runID string) *typev1.RunResult {
	t.Helper()
	var res *typev1.RunResult
	ok := eventually(t, learnWithin, func() bool {
		var err error
		res, err = c.GetRun(t.Context(), &agentv1.GetRunRequest{RunId: runID})
		return err == nil && res.GetLearning() != nil
	})
	if !ok {
		t.Fatalf("the memory stage did not learn from run %s within %s (GetRun: %v)", runID, learnWithin, res.GetLearning())
	}
	return res
}

// listMemories lists the memories c's caller holds through the public API.
func listMemories(t *testing.T, c agentv1.AgentServiceClient) []*memoryv1.Memory {
	t.Helper()
	resp, err := c.ListMemories(t.Context(), &agentv1.ListMemoriesRequest{})
	if err != nil {
		t.Fatalf("ListMemories: %v", err)
	}
	return resp.GetMemories()
}

func memoryTexts(ms []*memoryv1.Memory) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.GetContent()
	}
	return out
}

// runWith runs message through client c and wants a success.
func runWith(t *testing.T, c agentv1.AgentServiceClient, message string) *typev1.RunResult {
	t.Helper()
	res, err := c.Run(t.Context(), &agentv1.RunRequest{Message: message})
	if err != nil || !res.GetSuccess() {
		t.Fatalf("Run(%q): %v %v %v", message, res.GetOutcome(), res.GetError(), err)
	}
	return res
}

// TestMemoryLearns (issue 13.5), with the rules and API keys: what alice asks the agent to
// remember is learned after her run, recalled in her next conversation (it reaches the
// model's request) and never in bob's; telling it again stores nothing new. She lists and
// deletes her memories through the public API, after which her runs no longer recall it; bob
// can neither list nor delete hers, and an admin cannot list them either.
func TestMemoryLearns(t *testing.T) {
	cfg := config.Default()
	keys := withKeys(cfg)
	h := start(t, cfg,
		llmtest.Scenario{Name: "tell", Match: tellColour, Turns: []llmtest.Turn{text("I will remember that.")}},
		llmtest.Scenario{Name: "ask", Match: askColour, Turns: []llmtest.Turn{text("Let me see.")}},
	)
	addr := h.mesh.Addr("orchestrator")
	alice, bob, root := keyClient(t, addr, keys["alice"]), keyClient(t, addr, keys["bob"]), keyClient(t, addr, keys["root"])

	told := runWith(t, alice, tellColour)
	learning := learnedBy(t, alice, told.GetRunId()).GetLearning()
	mems := listMemories(t, alice)
	if !slices.Equal(memoryTexts(mems), []string{greenFact}) {
		t.Fatalf("alice's memories after her run = %q, want %q", memoryTexts(mems), greenFact)
	}
	fact := mems[0]
	if fact.GetImportance() != 0.9 || fact.GetUserId() != "acme/alice" ||
		fact.GetMetadata().GetFields()[memory.MetaRunID].GetStringValue() != told.GetRunId() {
		t.Errorf("the learned memory = %v, want importance 0.9, alice's, from run %s", fact, told.GetRunId())
	}
	if learning.GetMethod() != typev1.LearningMethod_LEARNING_METHOD_RULES || !slices.Equal(learning.GetMemoryIds(), []string{fact.GetId()}) ||
		len(learning.GetAccounting()) != 0 {
		t.Errorf("the run's learning = %v, want the rules storing %s, no request", learning, fact.GetId())
	}

	recalled := func(t *testing.T, c agentv1.AgentServiceClient) bool {
		t.Helper()
		seen := len(h.llm.Requests())
		runWith(t, c, askColour)
		prompt := ""
		for _, req := range h.llm.Requests()[seen:] {
			prompt += promptOf(req)
		}
		return strings.Contains(prompt, greenFact)
	}
	if !recalled(t, alice) {
		t.Error("alice's next conversation does not recall her favourite colour")
	}
	if recalled(t, bob) {
		t.Error("bob's conversation recalls alice's favourite colour")
	}

	t.Run("told again, nothing new is stored", func(t *testing.T) {
		again := runWith(t, alice, tellColour)
		l := learnedBy(t, alice, again.GetRunId()).GetLearning()
		if len(l.GetMemoryIds()) != 0 || !slices.Equal(l.GetDuplicateOf(), []string{fact.GetId()}) {
			t.Errorf("learning of the repeated run = %v, want a duplicate of %s", l, fact.GetId())
		}
		if n := len(listMemories(t, alice)); n != 1 {
			t.Errorf("alice holds %d memories, want 1", n)
		}
	})

	t.Run("others' memories are refused", func(t *testing.T) {
		if got := listMemories(t, bob); len(got) != 0 {
			t.Errorf("bob lists %q", memoryTexts(got))
		}
		_, err := bob.DeleteMemory(t.Context(), &agentv1.DeleteMemoryRequest{MemoryId: fact.GetId()})
		expectCode(t, "bob deletes alice's memory", err, codes.NotFound)
		_, err = bob.DeleteMemory(t.Context(), &agentv1.DeleteMemoryRequest{UserId: "acme/alice", MemoryId: fact.GetId()})
		expectCode(t, "bob deletes a memory as alice", err, codes.PermissionDenied)
		for who, c := range map[string]agentv1.AgentServiceClient{"bob": bob, "an admin": root} {
			_, err = c.ListMemories(t.Context(), &agentv1.ListMemoriesRequest{UserId: "acme/alice"})
			expectCode(t, who+" lists alice's memories", err, codes.PermissionDenied)
		}
		_, err = h.client.ListMemories(t.Context(), &agentv1.ListMemoriesRequest{})
		expectCode(t, "ListMemories without a key", err, codes.Unauthenticated)
		if got := listMemories(t, alice); len(got) != 1 {
			t.Errorf("alice's memories after bob's attempts = %q", memoryTexts(got))
		}
	})

	t.Run("bad requests", func(t *testing.T) {
		_, err := alice.DeleteMemory(t.Context(), &agentv1.DeleteMemoryRequest{})
		expectCode(t, "DeleteMemory without memory_id", err, codes.InvalidArgument)
		_, err = alice.ListMemories(t.Context(), &agentv1.ListMemoriesRequest{PageSize: -1})
		expectCode(t, "ListMemories with a negative page_size", err, codes.InvalidArgument)
		_, err = alice.ListMemories(t.Context(), &agentv1.ListMemoriesRequest{PageToken: "not a token"})
		expectCode(t, "ListMemories with a made-up page_token", err, codes.InvalidArgument)
	})

	t.Run("deleted, it is forgotten", func(t *testing.T) {
		if _, err := alice.DeleteMemory(t.Context(), &agentv1.DeleteMemoryRequest{MemoryId: fact.GetId()}); err != nil {
			t.Fatalf("alice deletes her memory: %v", err)
		}
		if got := listMemories(t, alice); len(got) != 0 {
			t.Errorf("alice's memories after the deletion = %q", memoryTexts(got))
		}
		if recalled(t, alice) {
			t.Error("alice's conversation still recalls the deleted memory")
		}
		_, err := alice.DeleteMemory(t.Context(), &agentv1.DeleteMemoryRequest{MemoryId: fact.GetId()})
		expectCode(t, "deleting it again", err, codes.NotFound)
	})
}

// TestMemoryLearnsWithTheModel (issue 13.5): with models.memory, the memory stage asks that
// model for the facts of a finished run — the run's conversation, the instructions, and one
// tool whose parameters are the facts' schema, which it must call — stores what it answers
// (with the rules' embeddings of memory.embeddings), and accounts the request in the run's
// learning. An answer outside the schema, or a failed request, falls back to the rules and
// says why.
func TestMemoryLearnsWithTheModel(t *testing.T) {
	const (
		tellName = "My name is Sam and I fly planes for a living."
		tellCat  = "My cat is called Tom."
		tellDog  = "My dog is called Rex."
		askJob   = "Am I a pilot?"
		samFact  = "The user, Sam, is a pilot."
	)
	memoryTurn := func(tt llmtest.Turn) []llmtest.Turn { return []llmtest.Turn{tt} }
	h := startWith(t, config.Default(), func(cfg *config.Config, _ string) {
		cfg.Models.Memory = &config.Target{Provider: "scripted", Model: "memory-model"}
		cfg.Memory.Embeddings = &config.Target{Provider: "rules", Model: "rules-v1"}
	},
		llmtest.Scenario{Name: "name", Match: tellName, Turns: []llmtest.Turn{text("Nice to meet you, Sam.")}},
		llmtest.Scenario{Name: "cat", Match: tellCat, Turns: []llmtest.Turn{text("A fine name.")}},
		llmtest.Scenario{Name: "dog", Match: tellDog, Turns: []llmtest.Turn{text("A good dog.")}},
		llmtest.Scenario{Name: "job", Match: askJob, Turns: []llmtest.Turn{text("Yes, you are.")}},
		llmtest.Scenario{Name: "name facts", Match: "User: " + tellName + "*", Turns: memoryTurn(
			call(memory.FactsTool, `{"facts": [{"text": "`+samFact+`", "importance": 0.8}]}`))},
		llmtest.Scenario{Name: "job facts", Match: "User: " + askJob + "*", Turns: memoryTurn(call(memory.FactsTool, `{"facts": []}`))},
		llmtest.Scenario{Name: "cat facts", Match: "User: " + tellCat + "*", Turns: memoryTurn(text("Cats are great."))},
		llmtest.Scenario{Name: "dog facts", Match: "User: " + tellDog + "*", Turns: memoryTurn(llmtest.Turn{Failure: llmtest.FailModelError})},
	)

	sam := h.run(t, &agentv1.RunRequest{Message: tellName})
	learning := learnedBy(t, h.client, sam.GetRunId()).GetLearning()
	var asked *llmtest.Request
	for _, req := range h.llm.Requests() {
		if req.Model == "memory-model" {
			asked = &req
		}
	}
	if asked == nil {
		t.Fatal("the memory model was never asked")
	}
	if len(asked.Messages) != 2 || asked.Messages[0].Role != "system" || string(asked.Messages[0].Content) != memory.FactsInstructions ||
		string(asked.Messages[1].Content) != "User: "+tellName+"\n\nAssistant: Nice to meet you, Sam." {
		t.Errorf("the memory model was asked %+v, want the instructions and the conversation", asked.Messages)
	}
	if asked.MaxTokens == nil || *asked.MaxTokens != memory.FactsMaxOutputTokens {
		t.Errorf("the memory model was asked for at most %v tokens, want %d", asked.MaxTokens, memory.FactsMaxOutputTokens)
	}
	if len(asked.Tools) != 1 || asked.Tools[0].Function.Name != memory.FactsTool || string(asked.ToolChoice) != `"required"` {
		t.Errorf("the memory model was offered %+v (tool_choice %s), want %s alone, required", asked.Tools, asked.ToolChoice, memory.FactsTool)
	} else if got, want := decodeJSON(t, asked.Tools[0].Function.Parameters), roundTrip(t, memory.FactsSchema); !reflect.DeepEqual(got, want) {
		t.Errorf("the tool's parameters = %v, want the facts schema %v", got, want)
	}

	mems := listMemories(t, h.client)
	if !slices.Equal(memoryTexts(mems), []string{samFact}) || mems[0].GetImportance() != 0.8 ||
		mems[0].GetMetadata().GetFields()[memory.MetaLearnedBy].GetStringValue() != "model" {
		t.Fatalf("memories after the model answered = %v", mems)
	}
	if learning.GetMethod() != typev1.LearningMethod_LEARNING_METHOD_MODEL || learning.GetFallbackReason() != "" {
		t.Errorf("learning = %v, want the model's", learning)
	}
	wantAccounting(t, learning, typev1.AccountingStatus_ACCOUNTING_STATUS_OK)

	t.Run("the next conversation recalls it by a semantic search", func(t *testing.T) {
		seen := len(h.llm.Requests())
		res := h.run(t, &agentv1.RunRequest{Message: askJob})
		if prompt := promptOf(h.llm.Requests()[seen]); !strings.Contains(prompt, samFact) {
			t.Errorf("the next conversation's request lacks the learned fact:\n%s", prompt)
		}
		if !slices.ContainsFunc(res.GetAccounting(), func(e *typev1.AccountingEntry) bool {
			return e.GetType() == typev1.AccountingType_ACCOUNTING_TYPE_EMBEDDING
		}) {
			t.Errorf("the run's accounting %v has no embedding of its memory search", res.GetAccounting())
		}
	})
	t.Run("an answer outside the schema falls back to the rules", func(t *testing.T) {
		res := h.run(t, &agentv1.RunRequest{Message: tellCat})
		l := learnedBy(t, h.client, res.GetRunId()).GetLearning()
		if l.GetMethod() != typev1.LearningMethod_LEARNING_METHOD_RULES || !strings.Contains(l.GetFallbackReason(), "did not call "+memory.FactsTool) {
			t.Errorf("learning = %v, want the rules, saying the model did not call %s", l, memory.FactsTool)
		}
		wantAccounting(t, l, typev1.AccountingStatus_ACCOUNTING_STATUS_OK)
		if got := memoryTexts(listMemories(t, h.client)); !slices.Contains(got, "The user's cat is called Tom.") {
			t.Errorf("memories = %q, want the rules' fact about the cat", got)
		}
	})
	t.Run("a failed request falls back to the rules", func(t *testing.T) {
		res := h.run(t, &agentv1.RunRequest{Message: tellDog})
		l := learnedBy(t, h.client, res.GetRunId()).GetLearning()
		if l.GetMethod() != typev1.LearningMethod_LEARNING_METHOD_RULES || l.GetFallbackReason() == "" {
			t.Errorf("learning = %v, want the rules, saying why", l)
		}
		wantAccounting(t, l, typev1.AccountingStatus_ACCOUNTING_STATUS_FAILED)
		if got := memoryTexts(listMemories(t, h.client)); !slices.Contains(got, "The user's dog is called Rex.") {
			t.Errorf("memories = %q, want the rules' fact about the dog", got)
		}
	})
}

// wantAccounting checks a learning's accounting: the memory model's request with the given
// status, then the embedding of the facts.
func wantAccounting(t *testing.T, l *typev1.RunLearning, llm typev1.AccountingStatus) {
	t.Helper()
	acc := l.GetAccounting()
	if len(acc) != 2 || acc[0].GetType() != typev1.AccountingType_ACCOUNTING_TYPE_LLM || acc[0].GetModel() != "memory-model" ||
		acc[0].GetStatus() != llm || (llm == typev1.AccountingStatus_ACCOUNTING_STATUS_OK && acc[0].GetTokens().GetTotal() == 0) ||
		acc[1].GetType() != typev1.AccountingType_ACCOUNTING_TYPE_EMBEDDING || acc[1].GetModel() != "rules-v1" {
		t.Errorf("learning accounting = %v, want the memory model's request (%s) and the facts' embedding", acc, llm)
	}
}

// decodeJSON decodes raw JSON into generic values.
func decodeJSON(t *testing.T, raw []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// roundTrip is v as it reads back from JSON.
func roundTrip(t *testing.T, v any) any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return decodeJSON(t, raw)
}

// TestRecalledMemoriesStayForEveryTurn: the memories a run recalls at its first turn are shown
// to the model at every turn, not only the first: a run that called a tool first answered
// without them, its later requests carrying no "Relevant memories".
func TestRecalledMemoriesStayForEveryTurn(t *testing.T) {
	const message = "Which locker is mine? And what is 6*7?"
	h := start(t, nil, llmtest.Scenario{Name: "recall", Match: message, Turns: []llmtest.Turn{calcTurn("c1", "6*7"), text("Locker 12; 42.")}})
	mem := memoryv1.NewMemoryServiceClient(dialStage(t, h.mesh.Addr(mesh.Memory)))
	if _, err := mem.Store(auth.OutgoingUser(t.Context(), "u1"), &memoryv1.StoreRequest{UserId: "u1",
		Content: &typev1.Message{Role: typev1.Role_ROLE_USER, Content: "The user's locker is number 12."}}); err != nil {
		t.Fatal(err)
	}
	res := h.run(t, &agentv1.RunRequest{Message: message, UserId: "u1"})
	if !res.GetSuccess() {
		t.Fatalf("%s %s: %s", res.GetOutcome(), res.GetExitReason(), res.GetError().GetMessage())
	}
	reqs := h.requestsOf(message, false)
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	for i, req := range reqs {
		if got := systemText(req); !strings.Contains(got, "Relevant memories:") || !strings.Contains(got, "locker is number 12") {
			t.Errorf("request %d does not show the recalled memory:\n%s", i+1, got)
		}
	}
}

// TestTheMemoryModelReadsWhatTheUserSaid: the memory model reads 32 KiB of a long
// conversation, cut at messages in valid UTF-8, and the user's messages come first: what the
// user said is what it learns from (facts about the user, what the assistant said only when
// the user confirmed it). Long answers of the assistant crowded the user's first message out
// of the newest 32 KiB, and a long message of the user lost its end, where it asked for
// something to be remembered.
func TestTheMemoryModelReadsWhatTheUserSaid(t *testing.T) {
	const (
		allergy = "Remember that I am allergic to peanuts."
		sister  = "Please remember that my sister is called Ana."
		ask     = "Which of these do you recommend?"
	)
	notes := "Here are my notes: " + strings.Repeat("ünïcödé notes ", 600) + sister // 8 KiB
	history := []*typev1.Message{{Role: typev1.Role_ROLE_USER, Content: allergy}}
	for i := range 10 { // 60 KiB of answers
		answer := fmt.Sprintf("Answer %d: %s", i, strings.Repeat("é long answer ", 450))
		history = append(history, &typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, Content: answer})
		if i == 5 {
			history = append(history, &typev1.Message{Role: typev1.Role_ROLE_USER, Content: notes})
		}
	}
	h := startWith(t, config.Default(), func(cfg *config.Config, _ string) {
		cfg.Models.Memory = &config.Target{Provider: "scripted", Model: "memory-model"}
	},
		// The request holds the history's 10 answers: the answer is turn 10.
		llmtest.Scenario{Name: "run", Match: allergy,
			Turns: slices.Repeat([]llmtest.Turn{text("Try the salad.")}, 11)},
		llmtest.Scenario{Name: "facts", Match: "User: *", Turns: []llmtest.Turn{
			call(memory.FactsTool, `{"facts": []}`)}},
	)
	res := h.run(t, &agentv1.RunRequest{Message: ask, History: history})
	learnedBy(t, h.client, res.GetRunId())
	var input string
	for _, req := range h.llm.Requests() {
		if req.Model == "memory-model" && len(req.Messages) == 2 {
			input = string(req.Messages[1].Content)
		}
	}
	if input == "" {
		t.Fatal("the memory model was never asked")
	}
	if n := len(input); n > 32<<10 || !utf8.ValidString(input) {
		t.Errorf("the memory model read %d bytes (valid UTF-8: %v), want at most 32 KiB of valid UTF-8",
			n, utf8.ValidString(input))
	}
	for _, want := range []string{"User: " + allergy, sister, "User: " + ask, "Assistant: Try the"} {
		if !strings.Contains(input, want) {
			t.Errorf("the memory model did not read %q", want)
		}
	}
	paras := strings.Split(input, "\n\n")
	if paras[0] != "User: "+allergy || paras[len(paras)-1] != "Assistant: Try the salad." {
		t.Errorf("the memory model read the conversation out of order: first %.60q, last %.60q",
			paras[0], paras[len(paras)-1])
	}
}
