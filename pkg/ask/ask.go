// Package ask gets a stage's decision from a model as a JSON object of a given schema, through
// the generation service (DESIGN §1: only the generation stage talks to providers). The model
// is offered one tool whose parameters are the schema and must call it; the call's arguments,
// validated against the schema, are the answer. Offering a tool works the same on every
// provider the generation stage speaks (OpenAI, Anthropic, any OpenAI-compatible server),
// which their own structured-output switches do not.
//
// A stage asks only when its configuration names a model for it (config.StageModels), and
// falls back to its deterministic rules when the answer is an error: ErrUnusable when the
// model answered outside the schema, a stage error when generation failed.
package ask

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/schema"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/textcut"
	"github.com/agentmesh/agentmesh/pkg/tokens"
	"google.golang.org/protobuf/types/known/structpb"
)

// ErrUnusable is the error of an answer that is not a call of the offered tool with arguments
// that match its schema; the wrapped message says what was wrong.
var ErrUnusable = errors.New("the model's answer is unusable")

// ErrTooLong is the error of a question not asked: its request does not fit the model's
// context window (Model.ContextWindow) even with its input cut to nothing (Question.Input), and
// its provider would refuse it. The wrapped message names the model and its window.
var ErrTooLong = errors.New("the question does not fit the model's context window")

// Model asks one provider/model target through the generation service.
type Model struct {
	// Client is the generation service.
	Client generationv1.GenerationServiceClient
	// Target is the provider and model to ask.
	Target *typev1.Target
	// MaxOutputTokens bounds the answer; 0 leaves the provider's default.
	MaxOutputTokens int64
	// ContextWindow and ContextWindowBufferTokens are the model's configured context window
	// and its safety margin (WithLimits); a question whose request, with them and
	// MaxOutputTokens (else OutputLimit) of answer, does not fit is asked with its input cut
	// to fit (Question.Input), or not at all when even that does not fit (ErrTooLong). 0 is
	// no known window.
	ContextWindow, ContextWindowBufferTokens int64
	// OutputLimit is the model's configured max_output_tokens (WithLimits): a MaxOutputTokens
	// above it is lowered to it, as a provider refuses more. 0 is no known limit.
	OutputLimit int64
}

// WithLimits sets m's ContextWindow, ContextWindowBufferTokens and OutputLimit to those cfg
// configures for its target's model (providers.*.models.*, else the defaults': config.Window)
// and returns m.
func (m *Model) WithLimits(cfg *config.Config) *Model {
	m.ContextWindow, m.ContextWindowBufferTokens, m.OutputLimit = cfg.Window(config.Target{
		Provider: m.Target.GetProvider(), Model: m.Target.GetModel()})
	return m
}

// maxOutput is the answer's bound a request asks for: MaxOutputTokens, at most OutputLimit.
func (m *Model) maxOutput() int64 {
	if m.OutputLimit > 0 && m.MaxOutputTokens > m.OutputLimit {
		return m.OutputLimit
	}
	return m.MaxOutputTokens
}

// maxCachedSchemas bounds the schemas kept compiled; a stage asks with one or two.
const maxCachedSchemas = 64

// schemas keeps the schemas of the questions asked compiled, for every Model.
var schemas schemaCache

// schemaCache keeps the schemas of questions compiled: a stage asks each question of a kind
// with the same schema, often built anew (the intent stage's depends on its configuration),
// and compiling it is most of the work Object does itself. A schema is known by its tool and
// its JSON encoding, in which a map's keys are sorted; a compiled schema is never changed, so
// one serves every Model and goroutine.
type schemaCache struct {
	mu    sync.Mutex
	byKey map[string]*schema.Schema
}

// compile returns doc, the schema of the tool's arguments, compiled. A schema that does not
// compile is not kept: it fails each time, as the first.
func (c *schemaCache) compile(tool string, doc map[string]any) (*schema.Schema, error) {
	url := "ask:///" + tool + ".json"
	raw, err := json.Marshal(doc)
	if err != nil {
		return schema.Compile(url, doc) // no key: compiled as it is, to fail as it would have
	}
	key := url + "\x00" + string(raw)
	c.mu.Lock()
	sch := c.byKey[key]
	c.mu.Unlock()
	if sch != nil {
		return sch, nil
	}
	sch, err = schema.Compile(url, doc)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byKey == nil || len(c.byKey) >= maxCachedSchemas {
		c.byKey = map[string]*schema.Schema{}
	}
	c.byKey[key] = sch
	return sch, nil
}

// Question is one request for a decision.
type Question struct {
	// RunID scopes the request, for tracing and accounting.
	RunID string
	// Instructions are the system message: what to decide and how.
	Instructions string
	// Input is the user message: what to decide about. When the request does not fit the
	// model's context window, Input is cut to fit, where no UTF-8 sequence is split: its
	// start and its end are kept, half each, with a note between them that tells the model
	// how much was left out (with KeepEnd, its end alone, the note before it), so that an
	// instruction after a pasted text still reaches the model.
	Input string
	// KeepEnd cuts Input's start rather than its end, for an input whose newest part is last.
	KeepEnd bool
	// Before and After go before and after Input in the user message and are never cut (e.g.
	// what introduces the input, the tools a plan may use).
	Before, After string
	// Tool names the tool whose arguments are the answer, e.g. "submit_plan".
	Tool string
	// Description tells the model what the tool's arguments mean.
	Description string
	// Schema is the JSON schema of the answer (an object schema).
	Schema map[string]any
}

// Answer is what an Object call cost and who answered.
type Answer struct {
	// Usage is the tokens of the request.
	Usage *typev1.TokenUsage
	// Model is the model that answered, as the provider reports it.
	Model string
	// Entry accounts the request for the run it was made for (an LLM entry: the target, its
	// latency, tokens, cost and stop reason, or its error); nil when no request was made.
	Entry *typev1.AccountingEntry
}

// Object asks q and decodes the validated answer into out (a pointer, as for
// encoding/json.Unmarshal). A failed generation is its stage error; an answer outside the
// schema, or one the provider's content filter stopped, wraps ErrUnusable. The Answer's
// Usage and Model are filled in whenever the model answered, its Entry whenever a request was
// made.
func (m *Model) Object(ctx context.Context, q Question, out any) (Answer, error) {
	compiled, err := schemas.compile(q.Tool, q.Schema)
	if err != nil {
		return Answer{}, fmt.Errorf("the schema of %s: %w", q.Tool, err)
	}
	params, err := structpb.NewStruct(q.Schema)
	if err != nil {
		return Answer{}, fmt.Errorf("the schema of %s: %w", q.Tool, err)
	}
	messages := []*typev1.Message{
		{Role: typev1.Role_ROLE_SYSTEM, Content: q.Instructions},
		{Role: typev1.Role_ROLE_USER, Content: q.Before + q.Input + q.After},
	}
	tools := []*typev1.Tool{{Name: q.Tool, Description: q.Description, InputSchema: params}}
	if err := m.fits(messages, tools); err != nil {
		cut, ok := m.cut(q, messages, tools)
		if !ok {
			return Answer{}, err
		}
		messages[1].Content = cut
	}
	temperature := 0.0
	start := time.Now()
	resp, err := m.Client.Generate(ctx, &generationv1.GenerateRequest{
		RunId:      q.RunID,
		Target:     m.Target,
		Messages:   messages,
		Tools:      tools,
		ToolChoice: "required",
		Sampling:   &generationv1.Sampling{Temperature: &temperature, MaxOutputTokens: m.maxOutput()},
	})
	entry := &typev1.AccountingEntry{
		Type: typev1.AccountingType_ACCOUNTING_TYPE_LLM, Provider: m.Target.GetProvider(), Model: m.Target.GetModel(),
		Status: typev1.AccountingStatus_ACCOUNTING_STATUS_OK, LatencyMs: time.Since(start).Milliseconds(),
		TimestampMs: time.Now().UnixMilli(), Attempts: 1, // no retry below: one provider request
	}
	if err != nil {
		se := stageerr.FromError(err)
		entry.Status, entry.Error = typev1.AccountingStatus_ACCOUNTING_STATUS_FAILED, se.Error()
		se.AccountAnswer(entry) // an answer cut off before any content was paid for
		return Answer{Entry: entry}, se
	}
	entry.Tokens, entry.StopReason = resp.GetUsage(), resp.GetStopReason()
	entry.ActualModel, entry.CostUsd = resp.GetModel(), resp.GetCostUsd()
	if resp.GetCached() {
		entry.Attempts = 0 // answered from the generation stage's cache
	}
	ans := Answer{Usage: resp.GetUsage(), Model: resp.GetModel(), Entry: entry}
	if resp.GetStopReason() == stopContentFilter {
		// What the filter let through is not the model's answer: a call's arguments cut off
		// midway, repaired, may still match the schema (a plan with its first steps only).
		return ans, fmt.Errorf("%w: the provider's content filter stopped the answer (stop reason %s)",
			ErrUnusable, stopContentFilter)
	}
	var call *typev1.ToolCall
	for _, c := range resp.GetToolCalls() {
		if c.GetName() == q.Tool {
			call = c
			break
		}
	}
	if call == nil {
		return ans, fmt.Errorf("%w: it did not call %s (answered %q)", ErrUnusable, q.Tool, clip(resp.GetContent()))
	}
	if call.GetArguments() == nil {
		// The generation stage refused the arguments (cut off at the output limit, not
		// JSON): the reason is in its repairs, and an empty object would be reported as one
		// missing every property.
		return ans, fmt.Errorf("%w: the arguments of %s were refused: %s", ErrUnusable, q.Tool,
			rejection(resp.GetRepairs(), call.GetId()))
	}
	args := call.GetArguments().AsMap()
	if err := compiled.Validate(args); err != nil {
		return ans, fmt.Errorf("%w: the arguments of %s do not match its schema: %s", ErrUnusable, q.Tool, schema.Message(err))
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return ans, fmt.Errorf("%w: %v", ErrUnusable, err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return ans, fmt.Errorf("%w: the arguments of %s: %v", ErrUnusable, q.Tool, err)
	}
	return ans, nil
}

// rejection is why the generation stage refused the arguments of the call named id, as its
// repairs say ("tool call <id> (<name>): rejected: <reason>").
func rejection(repairs []string, id string) string {
	for _, r := range repairs {
		if !strings.HasPrefix(r, "tool call "+id+" ") {
			continue
		}
		if _, reason, ok := strings.Cut(r, ": rejected: "); ok {
			return reason
		}
	}
	return "no reason given"
}

// stopContentFilter is the stop reason of an answer the provider's content filter withheld or
// stopped (OpenAI's content_filter, Anthropic's refusal).
const stopContentFilter = "content_filter"

// fits returns ErrTooLong when a request of messages and tools, with the buffer and
// maxOutput of answer (OutputLimit when the request sets no bound: the model may answer up to
// it), exceeds the model's context window; nil when it fits or the window is unknown.
func (m *Model) fits(messages []*typev1.Message, tools []*typev1.Tool) error {
	answer := cmp.Or(m.maxOutput(), m.OutputLimit)
	need, fits := tokens.FitsWindow(m.Target.GetModel(), messages, tools,
		m.ContextWindow, m.ContextWindowBufferTokens, answer)
	if fits {
		return nil
	}
	return fmt.Errorf("%w: the request's %d tokens, with a buffer of %d and %d of answer, "+
		"exceed the context window of %d tokens of %s/%s", ErrTooLong, need,
		m.ContextWindowBufferTokens, answer, m.ContextWindow,
		m.Target.GetProvider(), m.Target.GetModel())
}

// cut returns the user message of q with as much of q.Input as lets the request of messages
// (whose user message it replaces) and tools fit the model's window, with the note that says
// it was cut; false when not a character of the input fits.
func (m *Model) cut(q Question, messages []*typev1.Message, tools []*typev1.Tool) (string, bool) {
	// with is the user message keeping at most n bytes of the input, and how many it keeps.
	with := func(n int) (string, int) {
		if q.KeepEnd {
			kept := textcut.Tail(q.Input, n)
			note := fmt.Sprintf(cutEndNote, len(kept), len(q.Input))
			return q.Before + note + kept + q.After, len(kept)
		}
		// The start and the end, half of n each: what the input is about comes first, and
		// what to do with it (after a pasted document) often last.
		head := q.Input[:textcut.Boundary(q.Input, n-n/2)]
		tail := textcut.Tail(q.Input, n/2)
		note := fmt.Sprintf(cutMiddleNote, len(head), len(tail), len(q.Input))
		return q.Before + head + note + tail + q.After, len(head) + len(tail)
	}
	request := []*typev1.Message{messages[0], {Role: messages[1].GetRole()}}
	fits := func(n int) bool {
		request[1].Content, _ = with(n)
		return m.fits(request, tools) == nil
	}
	// The most bytes that fit: the input's tokens grow with its bytes.
	n := sort.Search(len(q.Input), func(n int) bool { return !fits(n + 1) })
	content, kept := with(n)
	return content, kept > 0 && fits(n)
}

// The notes that tell a model its input was cut (Question.Input).
const (
	cutMiddleNote = "\n\n[The middle of the input was cut to fit the model's context window: " +
		"its first %d and last %d of %d bytes are shown.]\n\n"
	cutEndNote = "[The input below was cut to fit the model's context window: " +
		"its last %d of %d bytes are shown.]\n\n"
)

// clip shortens a model's text for an error message.
func clip(s string) string {
	const limit = 200
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "…"
}
