package observation

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	observationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/observation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/ask"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/textcut"
	"github.com/agentmesh/agentmesh/pkg/tokens"
)

// DefaultSummaryInputBytes is how much of a result the observation model reads when
// Options.SummaryInputBytes is 0: the rest is left out, and the model is told so.
const DefaultSummaryInputBytes = 256 << 10

// Stage names this stage in the accounting entries of the requests it makes for a run.
const Stage = "observation"

// summaryInstructions is the observation model's system message; %s is the tool, %d the
// byte budget of the summary.
const summaryInstructions = "You summarise the output of the tool %s for an AI agent that called it and " +
	"cannot read all of it. Keep every fact the agent may need to finish its task: names, numbers, " +
	"identifiers, dates, errors with their messages, and the shape of the data (what kinds of records, " +
	"how many). Add nothing that is not in the output and do not comment on it. Answer with the summary " +
	"only, in at most %d bytes."

// summaryReserve is the share of the caller's time left (1/summaryReserve) that a summary
// leaves unused: a model that has not answered by then is given up, and the stage still
// answers in time, with the truncated result.
const summaryReserve = 10

// summarizer asks the observation model (seed 001's summarizer_model) for the summary of a
// result larger than the run's budget.
type summarizer struct {
	client     generationv1.GenerationServiceClient
	target     *typev1.Target
	inputBytes int
	// window, buffer and maxOutput are the model's configured limits (Options); a window of
	// 0 is unknown, and the model reads up to inputBytes.
	window, buffer, maxOutput int64
}

// summarize asks for a summary of raw that fits maxBytes. It returns the summary, or why
// there is none, and the accounting entry of its request. When the caller set a deadline, the
// model has until summaryReserve of the time left is left.
func (s *summarizer) summarize(caller context.Context, req *observationv1.ObserveRequest) (string, *typev1.AccountingEntry, error) {
	raw, maxBytes := req.GetRawResult(), req.GetMaxBytes()
	ctx := caller
	if deadline, ok := caller.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(caller, deadline.Add(-time.Until(deadline)/summaryReserve))
		defer cancel()
	}
	// About four bytes a token: room for a summary of the whole budget, and little more, within
	// the model's own output limit.
	out := max(maxBytes/3, 64)
	if s.maxOutput > 0 {
		out = min(out, s.maxOutput)
	}
	system := fmt.Sprintf(summaryInstructions, req.GetToolName(), maxBytes)
	input, err := s.fit(system, raw, out)
	if err != nil {
		return "", nil, err
	}
	temperature := 0.0
	start := time.Now()
	resp, err := s.client.Generate(ctx, &generationv1.GenerateRequest{
		RunId:  req.GetRunId(),
		Target: s.target,
		Messages: []*typev1.Message{
			{Role: typev1.Role_ROLE_SYSTEM, Content: system},
			{Role: typev1.Role_ROLE_USER, Content: input},
		},
		Sampling: &generationv1.Sampling{Temperature: &temperature, MaxOutputTokens: out},
	})
	entry := &typev1.AccountingEntry{
		Type: typev1.AccountingType_ACCOUNTING_TYPE_LLM, Provider: s.target.GetProvider(), Model: s.target.GetModel(),
		Status: typev1.AccountingStatus_ACCOUNTING_STATUS_OK, LatencyMs: time.Since(start).Milliseconds(),
		TimestampMs: time.Now().UnixMilli(), Attempts: 1, Stage: Stage,
		CharactersIn: int64(len(input)),
	}
	if err != nil {
		se := stageerr.FromError(err)
		entry.Status, entry.Error = typev1.AccountingStatus_ACCOUNTING_STATUS_FAILED, se.Error()
		se.AccountAnswer(entry) // an answer cut off before any content was paid for
		if ask.TimedOut(ctx) && caller.Err() == nil {
			return "", entry, fmt.Errorf("the observation model did not answer in time (%s), before the deadline of the observation: %w",
				time.Since(start).Round(time.Millisecond), se)
		}
		return "", entry, fmt.Errorf("the observation model failed: %w", se)
	}
	entry.Tokens, entry.StopReason, entry.ActualModel, entry.CostUsd = resp.GetUsage(), resp.GetStopReason(), resp.GetModel(), resp.GetCostUsd()
	entry.CharactersOut = int64(len(resp.GetContent()))
	if resp.GetCached() {
		entry.Attempts = 0 // answered from the generation stage's cache
	}
	summary := strings.TrimSpace(resp.GetContent())
	switch {
	case summary == "":
		return "", entry, errors.New("the observation model answered with no summary")
	case resp.GetStopReason() == "length":
		return "", entry, errors.New("the observation model's summary was cut off at its output token limit")
	case resp.GetStopReason() == "content_filter":
		// What the filter let through is not the model's summary.
		return "", entry, errors.New("the provider's content filter stopped the observation model's summary " +
			"(stop reason content_filter)")
	case int64(len(summary)) > maxBytes:
		return "", entry, fmt.Errorf("the observation model's summary of %d bytes is over the budget of %d bytes", len(summary), maxBytes)
	}
	return summary, entry, nil
}

// fit returns what the model reads of raw: at most inputBytes of it and, when the model's
// window is known, no more than the window leaves after the instructions, the buffer and out
// tokens of output, cut at a rune boundary and followed by a line that says how much of it is
// shown. A request over the window is one its provider refuses (HTTP 400), and the result was
// never summarised. A window that leaves no room for any of the result is an error naming it.
func (s *summarizer) fit(system, raw string, out int64) (string, error) {
	shown := func(cut int) string {
		if cut >= len(raw) {
			return raw
		}
		return raw[:cut] + fmt.Sprintf("\n[the output continues: only its first %d of %d bytes are shown]", cut, len(raw))
	}
	cut := textcut.Boundary(raw, s.inputBytes)
	if s.window <= 0 {
		return shown(cut), nil
	}
	counter := tokens.ForModel(s.target.GetModel())
	room := s.window - s.buffer - out
	for cut > 0 {
		n := counter.Messages([]*typev1.Message{
			{Role: typev1.Role_ROLE_SYSTEM, Content: system}, {Role: typev1.Role_ROLE_USER, Content: shown(cut)},
		})
		if n <= room {
			return shown(cut), nil
		}
		// Shorter in proportion to the excess, a little more, and always shorter.
		next := int(float64(cut) * float64(max(room, 0)) / float64(n) * 0.95)
		cut = textcut.Boundary(raw, min(next, cut-1))
	}
	return "", fmt.Errorf("the observation model %s/%s was not asked: its context window of %d tokens leaves no room "+
		"for the result after its instructions, a buffer of %d and %d of output", s.target.GetProvider(), s.target.GetModel(),
		s.window, s.buffer, out)
}

// summarized is the observation of a summary: the notice "[SUMMARIZED] Original size X bytes;
// summarized to Y bytes by <provider>/<model>." on its own first line, then the summary.
func summarized(summary string, originalBytes int, target *typev1.Target) string {
	return fmt.Sprintf("[SUMMARIZED] Original size %d bytes; summarized to %d bytes by %s/%s.\n%s",
		originalBytes, len(summary), target.GetProvider(), target.GetModel(), summary)
}
