package mesh_test

import (
	"strings"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/orchestrator"
)

// cutOffUntilNoticed answers cut off at the output token limit until a request carries the
// ephemeral cut-off notice as its last message; then it answers with complete.
func cutOffUntilNoticed(cut, complete llmtest.Turn) llmtest.Turn {
	return llmtest.Turn{Respond: func(req llmtest.Request, _ int) llmtest.Turn {
		if last := req.Messages[len(req.Messages)-1]; last.Role == "user" && string(last.Content) == orchestrator.CutOffNotice {
			return complete
		}
		cut.FinishReason = "length"
		return cut
	}}
}

// notStored fails when the cut-off notice or the cut-off text was stored in the conversation.
func notStored(t *testing.T, res *typev1.RunResult, cut string) {
	t.Helper()
	for _, m := range res.GetConversation() {
		if m.GetContent() == orchestrator.CutOffNotice || (cut != "" && m.GetContent() == cut) {
			t.Errorf("the conversation holds %q: the notice is ephemeral and the cut-off answer is not kept", m.GetContent())
		}
	}
}

// TestCutOffAnswerIsRetried (issue 11.7): a text answer cut off at the output token limit
// (stop reason length) is not a final answer (seed 000: truncation is incomplete, retry): the
// attempt is retried with an ephemeral notice asking for a shorter complete answer, and the
// complete answer is the report.
func TestCutOffAnswerIsRetried(t *testing.T) {
	const cut = "Paris has many sights: the Louvre, the Eiffel Tower, the"
	h := start(t, nil, llmtest.Scenario{Name: "cut", Match: "What should I see in Paris?", Turns: []llmtest.Turn{
		cutOffUntilNoticed(llmtest.Turn{Content: cut}, llmtest.Turn{Content: "The Louvre and the Eiffel Tower."}),
	}})
	res := h.runCase(t, &agentv1.RunRequest{Message: "What should I see in Paris?", Overrides: &agentv1.RunOverrides{MaxRetries: i32(3)}},
		typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, "COMPLETED", "SUA", "LLM:OK LLM:OK")
	if r := res.GetFinalReport(); r.GetContent() != "The Louvre and the Eiffel Tower." || r.GetStatus() != typev1.ReportStatus_REPORT_STATUS_SUCCESS || r.GetMetadata() != nil {
		t.Errorf("final report %v, want the complete answer, status success, no metadata", r)
	}
	if n := len(h.llm.Requests()); n != 2 {
		t.Errorf("%d provider requests, want 2", n)
	}
	if got := res.GetAccounting()[0].GetStopReason(); got != "length" {
		t.Errorf("first attempt's stop reason %q, want length", got)
	}
	notStored(t, res, cut)
}

// TestCutOffInEveryAttemptIsAcceptedFlagged (issue 11.7): when the last attempt is cut off
// too, the answer is kept, not thrown away, and flagged so no client takes it for complete:
// final_report.status PARTIAL with metadata truncated and stop_reason. The run succeeds: the
// model did answer.
func TestCutOffInEveryAttemptIsAcceptedFlagged(t *testing.T) {
	const cut = "The history of Rome begins in 753 BC, when"
	h := start(t, nil, llmtest.Scenario{Name: "always cut", Match: "Tell me the history of Rome.", Turns: []llmtest.Turn{
		{Content: cut, FinishReason: "length"},
	}})
	res := h.runCase(t, &agentv1.RunRequest{Message: "Tell me the history of Rome.", Overrides: &agentv1.RunOverrides{MaxRetries: i32(2)}},
		typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, "COMPLETED", "SUA", "LLM:OK LLM:OK")
	r := res.GetFinalReport()
	if r.GetContent() != cut || r.GetStatus() != typev1.ReportStatus_REPORT_STATUS_PARTIAL {
		t.Errorf("final report %q status %s, want the cut-off answer, PARTIAL", r.GetContent(), r.GetStatus())
	}
	if md := r.GetMetadata().GetFields(); !md["truncated"].GetBoolValue() || md["stop_reason"].GetStringValue() != "length" {
		t.Errorf("metadata %v, want truncated true and stop_reason length", r.GetMetadata())
	}
	reqs := h.llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d provider requests, want 2", len(reqs))
	}
	if last := reqs[1].Messages[len(reqs[1].Messages)-1]; string(last.Content) != orchestrator.CutOffNotice {
		t.Errorf("the retry's last message is %q, want the cut-off notice", last.Content)
	}
	if got := res.GetConversation()[2].GetContent(); got != cut {
		t.Errorf("stored answer %q", got)
	}
}

// TestCutOffFinalReportCallIsRetried (issue 11.7): a final_report call cut off at the output
// token limit is retried like a cut-off text answer, instead of being repaired into a report
// the model never finished and accepted.
func TestCutOffFinalReportCallIsRetried(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "cut report", Match: "How many moons has Mars?", Turns: []llmtest.Turn{
		cutOffUntilNoticed(call("final_report", `{"report_format":"json","content_json":{"answer":2,"detail":{"names":"Phobos and Dei`),
			call("final_report", `{"report_format":"json","content_json":{"answer":2}}`)),
	}})
	req := &agentv1.RunRequest{Message: "How many moons has Mars?", OutputFormat: typev1.OutputFormat_OUTPUT_FORMAT_JSON,
		OutputSchema: mustStruct(t, map[string]any{"type": "object", "required": []any{"answer"},
			"properties": map[string]any{"answer": map[string]any{"type": "integer"}, "detail": map[string]any{"type": "object"}}}),
		Overrides: &agentv1.RunOverrides{MaxRetries: i32(3)}}
	res := h.runCase(t, req, typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, "COMPLETED", "SUA", "LLM:OK LLM:OK")
	r := res.GetFinalReport()
	if r.GetStatus() != typev1.ReportStatus_REPORT_STATUS_SUCCESS || len(r.GetContentJson().GetFields()) != 1 || r.GetContentJson().GetFields()["answer"].GetNumberValue() != 2 {
		t.Errorf("final report %v, want the complete report {answer: 2}", r)
	}
	if n := len(h.llm.Requests()); n != 2 {
		t.Errorf("%d provider requests, want 2", n)
	}
	notStored(t, res, "")
}

// TestCutOffToolCallIsNotExecuted (issue 11.7): a tool call whose arguments were cut off at
// the output token limit is not repaired and executed: it is refused (the malformed-call
// path, counted against max_format_retries), and the model is told it was cut off.
func TestCutOffToolCallIsNotExecuted(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "cut call", Match: "What is 1234 times 5678?", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{Name: "calculator", Arguments: `{"expression": "1234*56`}}, FinishReason: "length"},
		text("I could not finish the calculation."),
	}})
	res := h.runCase(t, &agentv1.RunRequest{Message: "What is 1234 times 5678?"},
		typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, "COMPLETED", "SUATA", "LLM:OK LLM:OK")
	if res.GetToolCalls() != 0 {
		t.Errorf("%d tool calls executed, want none", res.GetToolCalls())
	}
	if got := toolMessage(t, res, 0); !strings.Contains(got, "cut off at the output token limit") {
		t.Errorf("tool message %q does not tell the model its call was cut off", got)
	}
}

// TestMaxTokensExceededIsItsOwnExitReason (issue 11.7): an answer cut off before it had any
// content (all of it spent on reasoning) is the generation stage's MAX_TOKENS_EXCEEDED; the
// run ends with that exit reason and its canned message, not LLM_ERROR, after one request
// (recovery aborts: the same request hits the same limit).
func TestMaxTokensExceededIsItsOwnExitReason(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "thinks too long", Match: "Prove the Riemann hypothesis.", Turns: []llmtest.Turn{
		{Reasoning: "Let us consider the zeta function and", FinishReason: "length"},
	}})
	res := h.runCase(t, &agentv1.RunRequest{Message: "Prove the Riemann hypothesis.", Overrides: &agentv1.RunOverrides{MaxRetries: i32(3)}},
		typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED, "MAX_TOKENS_EXCEEDED", "SU", "LLM:FAILED")
	if got := res.GetFinalReport().GetContent(); got != orchestrator.MessageAnswerTooLong {
		t.Errorf("final report %q, want %q", got, orchestrator.MessageAnswerTooLong)
	}
	if e := res.GetError(); e.GetRetryable() || !strings.Contains(e.GetMessage(), "stopped at the output token limit") {
		t.Errorf("error %v, want not retryable, naming the limit", e)
	}
	if n := len(h.llm.Requests()); n != 1 {
		t.Errorf("%d provider requests, want 1", n)
	}
}

// TestContentFilteredAnswerIsRetriedSayingSo: an answer the provider's content filter withheld
// (finish_reason content_filter, nothing delivered) is retried, as an empty answer is (seed
// 000), but its notice tells the model what happened: it was told that plain text answers are
// ignored and to use final_report, which has nothing to do with it. A run whose every answer
// is withheld says so in its error, where it said the model returned only empty responses.
func TestContentFilteredAnswerIsRetriedSayingSo(t *testing.T) {
	h := start(t, nil,
		llmtest.Scenario{Name: "filtered once", Match: "Tell me about the filtered topic.", Turns: []llmtest.Turn{{Respond: func(req llmtest.Request, attempt int) llmtest.Turn {
			if attempt == 1 {
				return llmtest.Turn{FinishReason: "content_filter"}
			}
			return llmtest.Turn{Content: "notice: " + string(req.Messages[len(req.Messages)-1].Content)}
		}}}},
		llmtest.Scenario{Name: "always filtered", Match: "Tell me about the forbidden topic.", Turns: []llmtest.Turn{{FinishReason: "content_filter"}}},
	)
	res := h.runCase(t, &agentv1.RunRequest{Message: "Tell me about the filtered topic.", Overrides: &agentv1.RunOverrides{MaxRetries: i32(2)}},
		typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, "COMPLETED", "SUA", "LLM:OK LLM:OK")
	notice, _ := strings.CutPrefix(res.GetFinalReport().GetContent(), "notice: ")
	if notice == orchestrator.EmptyResponseNotice || !strings.Contains(notice, "content filter") {
		t.Errorf("the retry's notice was %q, want one that says the content filter withheld the answer", notice)
	}

	res = h.runCase(t, &agentv1.RunRequest{Message: "Tell me about the forbidden topic.", Overrides: &agentv1.RunOverrides{MaxRetries: i32(2)}},
		typev1.Outcome_OUTCOME_FAILED_PROTOCOL_MALFORMED, "LLM_GENERATION_FAILURE", "SU", "LLM:OK LLM:OK")
	if msg := res.GetError().GetMessage(); !strings.Contains(msg, "content filter") {
		t.Errorf("error %q, want it to say the content filter withheld the answers", msg)
	}
}

// TestMaxTokensExceededIsAccounted: an answer cut off before it had any content was paid for
// (the provider spent the output token limit on reasoning, and reports it), but its attempt
// was accounted as a failure without tokens: the run's usage and max_tokens_consumed missed
// them. The failed attempt's entry and llm_response now carry the answer's usage, and the
// run's usage counts it.
func TestMaxTokensExceededIsAccounted(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "thinks too long", Match: "Prove Fermat's last theorem.", Turns: []llmtest.Turn{
		{Reasoning: "Let us consider elliptic curves and", FinishReason: "length", Usage: &llmtest.Usage{PromptTokens: 40, CompletionTokens: 16}},
	}})
	res := h.runCase(t, &agentv1.RunRequest{Message: "Prove Fermat's last theorem."},
		typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED, "MAX_TOKENS_EXCEEDED", "SU", "LLM:FAILED")
	if u := res.GetAccounting()[0].GetTokens(); u.GetInput() != 40 || u.GetOutput() != 16 || u.GetTotal() != 56 {
		t.Errorf("the attempt's tokens %v, want the 40 + 16 the provider reported", u)
	}
	if got := res.GetAccounting()[0].GetStopReason(); got != "length" {
		t.Errorf("the attempt's stop reason %q, want length", got)
	}
	if u := res.GetUsage(); u.GetTotal() != 56 {
		t.Errorf("run usage %v, want the attempt's 56 tokens", u)
	}
	evs, _ := h.storedEvents(t, res.GetRunId())
	for _, ev := range evs {
		if r := ev.GetLlmResponse(); r != nil && r.GetUsage().GetTotal() != 56 {
			t.Errorf("llm_response usage %v, want 56 tokens", r.GetUsage())
		}
	}
}

// TestPartlyFilteredAnswerIsNotTheAnswer: an answer the provider's content filter stopped
// after part of it was delivered (finish_reason content_filter with text) is no more the
// model's answer than one it withheld whole: it is retried with the content filter's notice,
// never stored, and a turn whose every answer the filter stopped ends the run as one whose
// every answer it withheld does. It was taken for a complete answer and reported as the
// model's, status success.
func TestPartlyFilteredAnswerIsNotTheAnswer(t *testing.T) {
	const partial = "Here is how to make the dangerous thing: first you"
	h := start(t, nil,
		llmtest.Scenario{Name: "filtered once", Match: "Tell me about the dangerous thing.", Turns: []llmtest.Turn{{Respond: func(req llmtest.Request, attempt int) llmtest.Turn {
			if attempt == 1 {
				return llmtest.Turn{Content: partial, FinishReason: "content_filter"}
			}
			return llmtest.Turn{Content: "notice: " + string(req.Messages[len(req.Messages)-1].Content)}
		}}}},
		llmtest.Scenario{Name: "always filtered", Match: "Tell me about the forbidden thing.", Turns: []llmtest.Turn{{Content: partial, FinishReason: "content_filter"}}},
	)
	res := h.runCase(t, &agentv1.RunRequest{Message: "Tell me about the dangerous thing.", Overrides: &agentv1.RunOverrides{MaxRetries: i32(2)}},
		typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, "COMPLETED", "SUA", "LLM:OK LLM:OK")
	if got := res.GetFinalReport().GetContent(); got != "notice: "+orchestrator.ContentFilteredNotice {
		t.Errorf("final report %q, want the retry's answer to the content filter's notice", got)
	}
	notStored(t, res, partial)

	res = h.runCase(t, &agentv1.RunRequest{Message: "Tell me about the forbidden thing.", Overrides: &agentv1.RunOverrides{MaxRetries: i32(2)}},
		typev1.Outcome_OUTCOME_FAILED_PROTOCOL_MALFORMED, "LLM_GENERATION_FAILURE", "SU", "LLM:OK LLM:OK")
	if msg := res.GetError().GetMessage(); !strings.Contains(msg, "content filter") {
		t.Errorf("error %q, want it to say the content filter stopped the answers", msg)
	}
	if got := res.GetFinalReport().GetContent(); got == partial || res.GetFinalReport().GetStatus() != typev1.ReportStatus_REPORT_STATUS_FAILURE {
		t.Errorf("final report %q status %s, want the canned failure", got, res.GetFinalReport().GetStatus())
	}
}

// TestEmptyAnswerAfterAFailureSaysBoth: a turn whose first attempt failed (the provider's
// connection dropped) and whose retry came back empty ends the run LLM_GENERATION_FAILURE
// with an error that says both, where it said the model returned only empty responses,
// hiding the failure.
func TestEmptyAnswerAfterAFailureSaysBoth(t *testing.T) {
	const message = "Answer after a dropped connection."
	h := start(t, nil, llmtest.Scenario{Match: message, Turns: []llmtest.Turn{{Failure: llmtest.FailNetworkError, FailuresBeforeSuccess: 1}}})
	res := h.runCase(t, &agentv1.RunRequest{Message: message, Overrides: &agentv1.RunOverrides{MaxRetries: i32(2)}},
		typev1.Outcome_OUTCOME_FAILED_PROTOCOL_MALFORMED, "LLM_GENERATION_FAILURE", "SU", "LLM:FAILED LLM:OK")
	msg := res.GetError().GetMessage()
	if !strings.Contains(msg, "1 attempt failed") || !strings.Contains(msg, "cannot reach") || !strings.Contains(msg, "1 came back empty") {
		t.Errorf("error %q, want it to say 1 attempt failed (and how) and 1 came back empty", msg)
	}
}

// TestStreamedDeltasSayTheirAttempt: a turn whose first answer is cut off at the output token
// limit is retried, and a run that streams its answers streams both: the deltas of the cut-off
// attempt, then the retry's. Every llm_delta names its attempt, the one of the llm_response
// that follows it, so that a client joins the deltas of one attempt and shows the retry's
// answer, not the two run together; the last attempt's deltas join up to the answer. The
// deltas carried no attempt, and a client joining a turn's deltas got the cut-off text with
// the answer after it.
func TestStreamedDeltasSayTheirAttempt(t *testing.T) {
	const cut, answer = "Paris has many sights: the Louvre, the Eiffel Tower, the", "The Louvre and the Eiffel Tower."
	h := start(t, nil, llmtest.Scenario{Name: "cut", Match: "What should I see in Paris?", Turns: []llmtest.Turn{
		cutOffUntilNoticed(llmtest.Turn{Content: cut}, llmtest.Turn{Content: answer}),
	}})
	stream, err := h.client.StreamRun(t.Context(), &agentv1.RunRequest{Message: "What should I see in Paris?", Overrides: &agentv1.RunOverrides{MaxRetries: i32(3)}})
	if err != nil {
		t.Fatal(err)
	}
	evs := received(t, stream)
	if len(evs) == 0 || evs[len(evs)-1].GetRunFinished().GetResult().GetFinalReport().GetContent() != answer {
		t.Fatalf("StreamRun did not end with a run_finished reporting %q", answer)
	}
	joined := map[int32]string{} // each attempt's deltas joined
	var pending []*eventv1.LlmDelta
	for _, ev := range evs {
		if d := ev.GetLlmDelta(); d != nil {
			pending = append(pending, d)
		}
		r := ev.GetLlmResponse()
		if r == nil {
			continue
		}
		for _, d := range pending {
			if d.GetAttempt() != r.GetAttempt() || d.GetTurn() != r.GetTurn() {
				t.Errorf("llm_delta %q of turn %d attempt %d comes before the llm_response of turn %d attempt %d",
					d.GetContent(), d.GetTurn(), d.GetAttempt(), r.GetTurn(), r.GetAttempt())
			}
			joined[d.GetAttempt()] += d.GetContent()
		}
		pending = nil
	}
	if joined[1] != cut || joined[2] != answer {
		t.Errorf("attempt 1's deltas join up to %q and attempt 2's to %q, want %q and %q", joined[1], joined[2], cut, answer)
	}
}

// TestDecideRetriesACutOffAnswer: Decide takes a text answer cut off at the output token limit
// for no more complete than a run does (seed 000: truncation is incomplete, retry): the model
// is asked again with the ephemeral cut-off notice, and the complete answer is the decision.
// Decide answered RESPOND_ONLY with the cut-off text, as if it were the whole answer.
func TestDecideRetriesACutOffAnswer(t *testing.T) {
	const cut = "Paris has many sights: the Louvre, the Eiffel Tower, the"
	h := start(t, nil, llmtest.Scenario{Name: "cut", Match: "What should I see in Paris?", Turns: []llmtest.Turn{
		cutOffUntilNoticed(llmtest.Turn{Content: cut}, llmtest.Turn{Content: "The Louvre and the Eiffel Tower."}),
	}})
	d, err := h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: "What should I see in Paris?"})
	if err != nil {
		t.Fatal(err)
	}
	if d.GetDecisionType() != typev1.DecisionType_DECISION_TYPE_RESPOND_ONLY || d.GetResponseText() != "The Louvre and the Eiffel Tower." {
		t.Errorf("decision %s %q, want RESPOND_ONLY with the complete answer", d.GetDecisionType(), d.GetResponseText())
	}
	reqs := h.llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d provider requests, want 2", len(reqs))
	}
	if last := reqs[1].Messages[len(reqs[1].Messages)-1]; string(last.Content) != orchestrator.CutOffNotice {
		t.Errorf("the retry's last message is %q, want the cut-off notice", last.Content)
	}
	for _, m := range reqs[1].Messages {
		if string(m.Content) == cut {
			t.Errorf("the retry holds the cut-off answer")
		}
	}
	if acc := d.GetAccounting(); len(acc) < 2 || acc[len(acc)-2].GetStopReason() != "length" {
		t.Errorf("accounting %v, want the cut-off attempt's entry with stop reason length", acc)
	}
}
