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
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/textcut"
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
}

// summarize asks for a summary of raw that fits maxBytes. It returns the summary, or why
// there is none, and the accounting entry of its request. When the caller set a deadline, the
// model has until summaryReserve of the time left is left.
func (s *summarizer) summarize(caller context.Context, req *observationv1.ObserveRequest) (string, *typev1.AccountingEntry, error) {
	raw, maxBytes := req.GetRawResult(), req.GetMaxBytes()
	ctx := caller
	var due time.Time // the summary's own deadline, when the caller set one
	if deadline, ok := caller.Deadline(); ok {
		var cancel context.CancelFunc
		due = deadline.Add(-time.Until(deadline) / summaryReserve)
		ctx, cancel = context.WithDeadline(caller, due)
		defer cancel()
	}
	input := raw
	if len(input) > s.inputBytes {
		cut := textcut.Boundary(raw, s.inputBytes)
		input = raw[:cut] + fmt.Sprintf("\n[the output continues: only its first %d of %d bytes are shown]", cut, len(raw))
	}
	temperature := 0.0
	start := time.Now()
	resp, err := s.client.Generate(ctx, &generationv1.GenerateRequest{
		RunId:  req.GetRunId(),
		Target: s.target,
		Messages: []*typev1.Message{
			{Role: typev1.Role_ROLE_SYSTEM, Content: fmt.Sprintf(summaryInstructions, req.GetToolName(), maxBytes)},
			{Role: typev1.Role_ROLE_USER, Content: input},
		},
		// About four bytes a token: room for a summary of the whole budget, and little more.
		Sampling: &generationv1.Sampling{Temperature: &temperature, MaxOutputTokens: max(maxBytes/3, 64)},
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
		// The generation stage's failure at the deadline (it has it too, rounded up) may
		// arrive before ctx's timer has fired on a busy machine: the clock says it too.
		timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded) || !due.IsZero() && !time.Now().Before(due)
		if timedOut && caller.Err() == nil {
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
	case int64(len(summary)) > maxBytes:
		return "", entry, fmt.Errorf("the observation model's summary of %d bytes is over the budget of %d bytes", len(summary), maxBytes)
	}
	return summary, entry, nil
}

// summarized is the observation of a summary: the notice "[SUMMARIZED] Original size X bytes;
// summarized to Y bytes by <provider>/<model>." on its own first line, then the summary.
func summarized(summary string, originalBytes int, target *typev1.Target) string {
	return fmt.Sprintf("[SUMMARIZED] Original size %d bytes; summarized to %d bytes by %s/%s.\n%s",
		originalBytes, len(summary), target.GetProvider(), target.GetModel(), summary)
}
