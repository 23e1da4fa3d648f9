package memory_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/ask"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/telemetry"
	"github.com/agentmesh/agentmesh/services/generation"
	"github.com/agentmesh/agentmesh/services/memory"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
)

// serve serves a memory service built from opts until the test ends, then closes it.
func serve(t *testing.T, opts memory.Options) memoryv1.MemoryServiceClient {
	t.Helper()
	if opts.Now == nil {
		opts.Now = tickingClock()
	}
	svc := memory.New(opts)
	t.Cleanup(func() { _ = svc.Close() })
	return memoryv1.NewMemoryServiceClient(grpctest.Serve(t, svc.Register))
}

// conversation is a finished run whose user said each of messages.
func conversation(runID string, messages ...string) *typev1.RunResult {
	res := &typev1.RunResult{RunId: runID, Conversation: []*typev1.Message{{Role: typev1.Role_ROLE_SYSTEM, Content: "You are agentmesh."}}}
	for _, m := range messages {
		res.Conversation = append(res.Conversation, user(m), &typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, Content: "Noted."})
	}
	return res
}

// saveRun saves a run of userID.
func saveRun(t *testing.T, c memoryv1.MemoryServiceClient, userID string, res *typev1.RunResult) {
	t.Helper()
	if _, err := c.SaveRun(t.Context(), &memoryv1.SaveRunRequest{UserId: userID, Result: res}); err != nil {
		t.Fatalf("save %s: %v", res.GetRunId(), err)
	}
}

// learned waits until the memory stage has learned from a run and returns what it learned.
func learned(t *testing.T, c memoryv1.MemoryServiceClient, runID string) *typev1.RunLearning {
	t.Helper()
	var l *typev1.RunLearning
	waitFor(t, "learning from "+runID, func() bool {
		resp, err := c.GetRun(t.Context(), &memoryv1.GetRunRequest{RunId: runID})
		if err != nil {
			t.Fatal(err)
		}
		l = resp.GetResult().GetLearning()
		return l != nil
	})
	return l
}

// memories lists the personal memories of userID.
func memories(t *testing.T, c memoryv1.MemoryServiceClient, userID string) []*memoryv1.Memory {
	t.Helper()
	resp, err := c.List(t.Context(), &memoryv1.ListRequest{UserId: userID})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetMemories()
}

func contents(ms []*memoryv1.Memory) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.GetContent()
	}
	return out
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not done after 10s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A saved run's facts land in its user's memory with their importance and provenance, once;
// the same facts from a later run are recognised as duplicates, and another user's run
// learns for that user only.
func TestLearningFromRuns(t *testing.T) {
	c := serve(t, memory.Options{})
	saveRun(t, c, "alice", conversation("run-1", "Remember that my favourite colour is green.", "What is 6 times 7?", "I live in Lisbon."))
	first := learned(t, c, "run-1")
	got := memories(t, c, "alice")
	if want := []string{"The user lives in Lisbon.", "The user's favourite colour is green."}; !slices.Equal(contents(got), want) {
		t.Fatalf("alice's memories = %q, want %q", contents(got), want)
	}
	for _, m := range got {
		meta := m.GetMetadata().GetFields()
		if meta[memory.MetaRunID].GetStringValue() != "run-1" || meta[memory.MetaLearnedBy].GetStringValue() != "rules" {
			t.Errorf("memory %q has metadata %v, want run_id run-1, learned_by rules", m.GetContent(), meta)
		}
	}
	if got[0].GetImportance() != 0.6 || got[1].GetImportance() != 0.9 {
		t.Errorf("importance %v and %v, want 0.6 for a statement, 0.9 for a request to remember", got[0].GetImportance(), got[1].GetImportance())
	}
	if first.GetMethod() != typev1.LearningMethod_LEARNING_METHOD_RULES || len(first.GetMemoryIds()) != 2 || len(first.GetDuplicateOf()) != 0 {
		t.Errorf("learning of run-1 = %v", first)
	}

	saveRun(t, c, "alice", conversation("run-2", "my FAVOURITE colour is green!", "I live in Lisbon", "My cat is called Tom."))
	second := learned(t, c, "run-2")
	if want := []string{got[1].GetId(), got[0].GetId()}; !slices.Equal(second.GetDuplicateOf(), want) || len(second.GetMemoryIds()) != 1 {
		t.Errorf("learning of run-2 = %v, want duplicates %v and one new memory", second, want)
	}
	if n := len(memories(t, c, "alice")); n != 3 {
		t.Errorf("alice holds %d memories after run-2, want 3", n)
	}

	saveRun(t, c, "bob", conversation("run-3", "My favourite colour is green."))
	if l := learned(t, c, "run-3"); len(l.GetMemoryIds()) != 1 {
		t.Errorf("learning of bob's run = %v, want one memory of his own", l)
	}
	if got := contents(memories(t, c, "bob")); !slices.Equal(got, []string{"The user's favourite colour is green."}) {
		t.Errorf("bob's memories = %q", got)
	}

	t.Run("nothing worth remembering records nothing", func(t *testing.T) {
		saveRun(t, c, "alice", conversation("run-4", "What is 6 times 7?"))
		saveRun(t, c, "alice", conversation("run-5", "My dog is called Rex."))
		learned(t, c, "run-5") // learned in order: run-4 is done too
		resp, err := c.GetRun(t.Context(), &memoryv1.GetRunRequest{RunId: "run-4"})
		if err != nil || resp.GetResult().GetLearning() != nil {
			t.Errorf("run-4's learning = %v, %v; want none", resp.GetResult().GetLearning(), err)
		}
	})
}

// The rules never keep a sentence naming a password, a key, a token or payment details
// (README, "Memory that learns"), in the plural too: only the rest of the run is learned.
// "My AWS access key is …", "My passwords are …" and "My bank account number is …" were
// stored as facts about the user, to be recalled into later prompts.
func TestLearningKeepsNoSecrets(t *testing.T) {
	c := serve(t, memory.Options{})
	saveRun(t, c, "alice", conversation("run-1",
		"My AWS access key is AKIAIOSFODNN7EXAMPLE.",
		"Remember that my SSH private key is in ~/.ssh/id_ed25519.",
		"My passwords are hunter2 and hunter3.",
		"My tokens are abc and def.",
		"My bank account number is 12345678.",
		"Remember that my debit card expires in May.",
		"I live in Lisbon."))
	learned(t, c, "run-1")
	if got := contents(memories(t, c, "alice")); !slices.Equal(got, []string{"The user lives in Lisbon."}) {
		t.Errorf("alice's memories = %q, want only where she lives", got)
	}
}

// With an embedder, a fact whose embedding is as good as a stored memory's is a duplicate
// even in other words, and the embedding request of the facts is accounted in the learning.
func TestLearningDuplicatesByMeaning(t *testing.T) {
	c := serve(t, memory.Options{Embedder: &accountedEmbedder{}})
	saveRun(t, c, "alice", conversation("run-1", "My car is red."))
	first := learned(t, c, "run-1")
	if len(first.GetMemoryIds()) != 1 || len(first.GetAccounting()) != 1 || first.GetAccounting()[0].GetType() != typev1.AccountingType_ACCOUNTING_TYPE_EMBEDDING {
		t.Fatalf("learning of run-1 = %v, want one memory and its embedding accounted", first)
	}
	saveRun(t, c, "alice", conversation("run-2", "My automobile is red."))
	if second := learned(t, c, "run-2"); !slices.Equal(second.GetDuplicateOf(), first.GetMemoryIds()) {
		t.Errorf("learning of run-2 = %v, want a duplicate of %v", second, first.GetMemoryIds())
	}
	if got := contents(memories(t, c, "alice")); !slices.Equal(got, []string{"The user's car is red."}) {
		t.Errorf("alice's memories = %q", got)
	}
}

// accountedEmbedder is conceptEmbedder accounting its requests as GenerationEmbedder does.
type accountedEmbedder struct{ conceptEmbedder }

func (e *accountedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, *typev1.AccountingEntry, error) {
	vectors, _, err := e.conceptEmbedder.Embed(ctx, texts)
	return vectors, &typev1.AccountingEntry{Type: typev1.AccountingType_ACCOUNTING_TYPE_EMBEDDING, Provider: "p", Model: "e"}, err
}

// A user at the quota learns what fits, and the learning says the memory is full.
func TestLearningIntoAFullMemory(t *testing.T) {
	c := serve(t, memory.Options{QuotaPerUser: 1})
	saveRun(t, c, "alice", conversation("run-1", "My name is Sam. I live in Lisbon."))
	l := learned(t, c, "run-1")
	if len(l.GetMemoryIds()) != 1 || !strings.Contains(l.GetError(), "MEMORY_FULL") {
		t.Errorf("learning = %v, want one memory and a MEMORY_FULL error", l)
	}
}

// crashedLearner leaves, in the SQLite database at path, run-1 of alice ("Remember that my
// locker is number 12.") claimed at at by a learner that crashed before it finished, and
// returns the store reopened over the database, as the next service finds it.
func crashedLearner(t *testing.T, path string, at time.Time) memory.Store {
	t.Helper()
	store, err := memory.OpenSQLite(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.SaveRun(t.Context(), "alice", conversation("run-1", "Remember that my locker is number 12.")); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := store.ClaimLearning(t.Context(), at, memory.LearnLease); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	reopened, err := memory.OpenSQLite(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	return reopened
}

// A run being learned from when its learner crashed stays queued: the next service over the
// same database learns from it once the crashed learner's claim has run out.
func TestLearningSurvivesACrash(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	reopened := crashedLearner(t, filepath.Join(t.TempDir(), "memory.db"), start)
	c := serve(t, memory.Options{Store: reopened, Now: func() time.Time { return start.Add(memory.LearnLease) }})
	if l := learned(t, c, "run-1"); len(l.GetMemoryIds()) != 1 {
		t.Errorf("learning after the crash = %v", l)
	}
	if got := contents(memories(t, c, "alice")); !slices.Equal(got, []string{"The user's locker is number 12."}) {
		t.Errorf("alice's memories = %q", got)
	}
}

// A run claimed by a learner that crashed moments before the service started is learned from
// once that claim runs out (LearnLease after it was made), with no other run saved to wake the
// learner: it waited for the next save, so the user's next conversation did not recall what the
// run had learned.
func TestLearningResumesWhenACrashedClaimRunsOut(t *testing.T) {
	crashed := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	reopened := crashedLearner(t, filepath.Join(t.TempDir(), "memory.db"), crashed)
	// The service starts 300 ms before the crashed learner's claim runs out; its clock runs.
	started := time.Now()
	now := func() time.Time { return crashed.Add(memory.LearnLease - 300*time.Millisecond + time.Since(started)) }
	c := serve(t, memory.Options{Store: reopened, Now: now})
	if l := learned(t, c, "run-1"); len(l.GetMemoryIds()) != 1 {
		t.Errorf("learning after the claim ran out = %v", l)
	}
}

// TestLearningFromASlowModel: a memory model that does not answer within FactsTimeout is
// given up and the rules pick the facts, saying why. Learning waited for it until
// LearnTimeout, was cut off, and started again with the same model: a model slower than
// that (a local model reading a long conversation) lost the run's facts after three tries,
// each holding up every run queued behind it.
func TestLearningFromASlowModel(t *testing.T) {
	gen := &stuckGeneration{asked: make(chan struct{})}
	c := serve(t, memory.Options{FactsTimeout: 50 * time.Millisecond,
		Facts: &ask.Model{Client: gen, Target: &typev1.Target{Provider: "p", Model: "m"}}})
	saveRun(t, c, "alice", conversation("run-1", "My name is Sam."))
	l := learned(t, c, "run-1")
	if l.GetMethod() != typev1.LearningMethod_LEARNING_METHOD_RULES || len(l.GetMemoryIds()) != 1 ||
		!strings.Contains(l.GetFallbackReason(), "did not answer within 50ms") {
		t.Errorf("learning = %v, want the rules' fact, saying the model did not answer in time", l)
	}
	if a := l.GetAccounting(); len(a) != 1 ||
		a[0].GetStatus() != typev1.AccountingStatus_ACCOUNTING_STATUS_FAILED {
		t.Errorf("accounting %v, want the model's failed request", a)
	}
	if got := contents(memories(t, c, "alice")); !slices.Equal(got, []string{"The user's name is Sam."}) {
		t.Errorf("alice's memories = %q", got)
	}
}

// Closing the service while it waits for the model leaves the run queued, unclaimed: the next
// service over the same database learns from it at once.
func TestLearningCutOffByClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	open := func() memory.Store {
		s, err := memory.OpenSQLite(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	gen := &stuckGeneration{asked: make(chan struct{})}
	svc := memory.New(memory.Options{Store: open(), Facts: &ask.Model{Client: gen, Target: &typev1.Target{Provider: "p", Model: "m"}}})
	closeWhileLearning(t, svc, gen)

	c := serve(t, memory.Options{Store: open()})
	if l := learned(t, c, "run-1"); l.GetMethod() != typev1.LearningMethod_LEARNING_METHOD_RULES || len(l.GetMemoryIds()) != 1 {
		t.Errorf("learning after the restart = %v", l)
	}
}

// TestACutOffLearningSaysWhyInItsSpan: learning from a run cut off by the service closing
// ends its agentmesh.memory.learn span with status Error and error.type "canceled", as the
// OpenTelemetry conventions record a failed operation (README "Tracing"); the span had the
// status alone, and no error.type to tell a cut-off from a storage failure by.
func TestACutOffLearningSaysWhyInItsSpan(t *testing.T) {
	rec := telemetry.NewRecorder()
	gen := &stuckGeneration{asked: make(chan struct{})}
	svc := memory.New(memory.Options{Store: memory.NewMemoryStore(), TracerProvider: rec.Provider("agentmesh-memory"),
		Facts: &ask.Model{Client: gen, Target: &typev1.Target{Provider: "p", Model: "m"}}})
	closeWhileLearning(t, svc, gen)
	var learn sdktrace.ReadOnlySpan
	for _, s := range rec.Spans() {
		if s.Name() == "agentmesh.memory.learn" {
			learn = s
		}
	}
	if learn == nil {
		t.Fatal("no agentmesh.memory.learn span")
	}
	got := ""
	for _, kv := range learn.Attributes() {
		if kv.Key == "error.type" {
			got = kv.Value.AsString()
		}
	}
	if learn.Status().Code != codes.Error || got != "canceled" {
		t.Errorf("agentmesh.memory.learn: status %v, error.type %q; want Error and canceled", learn.Status(), got)
	}
}

// closeWhileLearning saves run-1 for alice, whose message has a fact to learn, and closes svc
// once its fact model (gen) is asked, so that the learning is cut off.
func closeWhileLearning(t *testing.T, svc *memory.Service, gen *stuckGeneration) {
	t.Helper()
	if _, err := svc.SaveRun(t.Context(), &memoryv1.SaveRunRequest{UserId: "alice", Result: conversation("run-1", "My name is Sam.")}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-gen.asked:
	case <-time.After(10 * time.Second):
		t.Fatal("the model was never asked")
	}
	if err := svc.Close(); err != nil {
		t.Fatal(err)
	}
}

// stuckGeneration is a generation service whose Generate answers only when its caller gives up.
type stuckGeneration struct {
	generationv1.GenerationServiceClient
	asked chan struct{}
}

func (g *stuckGeneration) Generate(ctx context.Context, _ *generationv1.GenerateRequest, _ ...grpc.CallOption) (*generationv1.GenerateResponse, error) {
	close(g.asked)
	<-ctx.Done()
	return nil, ctx.Err()
}

// blockingEmbedder embeds as the test embedder does, but holds its first call until release
// is closed.
type blockingEmbedder struct {
	first            sync.Once
	entered, release chan struct{}
}

func (e *blockingEmbedder) Embed(_ context.Context, texts []string) ([][]float32, *typev1.AccountingEntry, error) {
	e.first.Do(func() {
		close(e.entered)
		<-e.release
	})
	out := make([][]float32, len(texts))
	for i, text := range texts {
		v := make([]float32, 64)
		for _, r := range text {
			v[int(r)%len(v)]++
		}
		out[i] = v
	}
	return out, nil, nil
}

// TestARunForgottenWhileLearnedFromLeavesTheQueueGoing: the in-memory store forgets a run
// (its retention) while the learner learns from it; the learner goes on with the runs queued
// behind it. It stopped, taking the run's absence for a storage failure, and the runs behind
// it waited for the next save, which could forget them unlearned.
func TestARunForgottenWhileLearnedFromLeavesTheQueueGoing(t *testing.T) {
	emb := &blockingEmbedder{entered: make(chan struct{}), release: make(chan struct{})}
	c := serve(t, memory.Options{Store: memory.NewMemoryStoreKeeping(memory.Retention{MaxRuns: 2}), Embedder: emb})
	saveRun(t, c, "alice", conversation("run-x", "My name is Sam."))
	<-emb.entered // learning from run-x has begun
	saveRun(t, c, "alice", conversation("run-w", "I live in Paris."))
	saveRun(t, c, "alice", conversation("run-y", "I work at Acme.")) // forgets run-x (MaxRuns 2)
	close(emb.release)
	waitFor(t, "learning from the runs queued behind the forgotten one", func() bool {
		for _, id := range []string{"run-w", "run-y"} {
			resp, err := c.GetRun(t.Context(), &memoryv1.GetRunRequest{RunId: id})
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetResult().GetLearning() == nil {
				return false
			}
		}
		return true
	})
}

// claimsFailing is a store whose ClaimLearning fails, as a database that went away, while
// failures are left.
type claimsFailing struct {
	memory.Store
	failures atomic.Int32
}

func (s *claimsFailing) ClaimLearning(ctx context.Context, now time.Time, lease time.Duration) (memory.LearnJob, bool, error) {
	if s.failures.Add(-1) >= 0 {
		return memory.LearnJob{}, false, errors.New("database is down")
	}
	return s.Store.ClaimLearning(ctx, now, lease)
}

// Learning stopped by a storage failure starts again by itself once the storage is back: it
// waited for the next saved run, so a user's last run before an outage was not learned from
// until the user had another.
func TestLearningResumesAfterAStorageFailure(t *testing.T) {
	sqlite, err := memory.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "memory.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sqlite.Close() })
	store := &claimsFailing{Store: sqlite}
	store.failures.Store(2)
	c := serve(t, memory.Options{Store: store, Now: time.Now})
	saveRun(t, c, "alice", conversation("run-1", "Remember that my locker is number 12."))
	if l := learned(t, c, "run-1"); len(l.GetMemoryIds()) != 1 {
		t.Errorf("learning after the failures = %v", l)
	}
}

// TestTheModelsSecretsAreNotKept: a fact the memory model picks that names a password, a key
// or payment details is not stored, as the rules never keep one: the model is told to leave
// them out, but a model that keeps one anyway (a small local model, or one the conversation
// talked into it) put the user's credentials into the memory recalled into the prompts of
// every later conversation, sent to whichever provider answers them.
func TestTheModelsSecretsAreNotKept(t *testing.T) {
	llm := llmtest.New(t, llmtest.Scenario{Name: "facts", Match: "*", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{Name: memory.FactsTool, Arguments: `{"facts": [
			{"text": "The user's name is Sam.", "importance": 0.6},
			{"text": "The user's wifi password is hunter2.", "importance": 0.9},
			{"text": "The user's credit card number is 4111 1111 1111 1111.", "importance": 0.9}]}`}}},
	}})
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	gen := generation.New(generation.Options{Providers: map[string]generation.Provider{
		"scripted": generation.NewOpenAI(generation.OpenAIOptions{Name: "scripted", BaseURL: llm.URL(),
			APIKey: "test-key", HTTPClient: &http.Client{Transport: tr}}),
	}})
	c := serve(t, memory.Options{Facts: &ask.Model{
		Client: generationv1.NewGenerationServiceClient(grpctest.Serve(t, gen.Register)),
		Target: &typev1.Target{Provider: "scripted", Model: "memory-model"}}})
	saveRun(t, c, "alice", conversation("run-1", "I'm Sam. Remember my wifi password, hunter2, and my card."))
	l := learned(t, c, "run-1")
	if l.GetMethod() != typev1.LearningMethod_LEARNING_METHOD_MODEL {
		t.Fatalf("learning = %v, want the model's facts", l)
	}
	if got := contents(memories(t, c, "alice")); !slices.Equal(got, []string{"The user's name is Sam."}) {
		t.Errorf("alice's memories = %q, want her name only", got)
	}
}
