package orchestrator

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/target"
	"github.com/agentmesh/agentmesh/pkg/tokens"
	"github.com/agentmesh/agentmesh/pkg/toolname"
	"github.com/agentmesh/agentmesh/pkg/transcript"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// AdapterVersion is the version of the protocol adapter contract recorded in every contract
// and transcript entry.
const AdapterVersion = "agentmesh-adapter/1"

// DefaultContract returns the defaults of DESIGN §5 with the built-in rules model as target.
func DefaultContract() *typev1.ExecutionContract {
	return &typev1.ExecutionContract{
		AdapterVersion:            AdapterVersion,
		MaxTurns:                  10,
		MaxToolCallsPerTurn:       10,
		MaxRetries:                3,
		ToolTimeoutMs:             30_000,
		StepTimeoutMs:             120_000,
		TotalTimeoutMs:            600_000,
		ToolResponseMaxBytes:      12_288,
		ContextWindow:             131_072,
		ContextWindowBufferTokens: 2_048,
		MaxOutputTokens:           4_096,
		MaxFormatRetries:          1,
		ApprovalTimeoutMs:         300_000,
		AnswerTimeoutMs:           300_000,
		ToolTransport:             typev1.ToolTransport_TOOL_TRANSPORT_NATIVE,
		Targets:                   []*typev1.Target{{Provider: "rules", Model: "rules-v1"}},
	}
}

// buildContract applies a request's overrides to the defaults. streamed is whether the run
// streams its answers unless the request says otherwise: the API that starts it streams its
// events (StreamRun). The contract names its model profile (model_profile_id, its first
// target), as its transcript entries record it. Targets the overrides name bring the context
// limits limits gives for their models (when limits is not nil), which the request's own
// limits override in turn. Out-of-range overrides, and those beyond the operator's ceilings,
// are INVALID_INPUT errors that name the field.
func buildContract(defaults *typev1.ExecutionContract, runID string, req *agentv1.RunRequest, streamed bool,
	limits func(*typev1.Target) (window, buffer, maxOutput int64), ceilings *config.RunLimits,
) (*typev1.ExecutionContract, error) {
	c := proto.CloneOf(defaults)
	c.ContractId = runID
	c.ContractHash = ""
	c.OutputFormat = req.GetOutputFormat()
	c.StreamAnswers = streamed
	if c.AdapterVersion == "" {
		c.AdapterVersion = AdapterVersion
	}
	o := req.GetOverrides()
	if o == nil {
		c.ModelProfileId = targetProfile(c.GetTargets())
		return hashed(c), checkContract(c, ceilings)
	}
	for i, t := range o.GetTargets() {
		if err := target.CheckNames(fmt.Sprintf("overrides.targets[%d]", i), t); err != nil {
			return nil, err
		}
	}
	if len(o.GetTargets()) > 0 {
		c.Targets = o.GetTargets()
		if limits != nil {
			takeLimits(c, limits)
		}
	}
	setInt32(&c.MaxTurns, o.MaxTurns)
	setInt32(&c.MaxToolCallsPerTurn, o.MaxToolCallsPerTurn)
	setInt32(&c.MaxToolCallsTotal, o.MaxToolCallsTotal)
	setInt32(&c.MaxRetries, o.MaxRetries)
	setInt64(&c.MaxTokensConsumed, o.MaxTokensConsumed)
	setInt64(&c.ToolTimeoutMs, o.ToolTimeoutMs)
	setInt64(&c.StepTimeoutMs, o.StepTimeoutMs)
	setInt64(&c.TotalTimeoutMs, o.TotalTimeoutMs)
	setInt64(&c.ToolResponseMaxBytes, o.ToolResponseMaxBytes)
	setInt64(&c.ContextWindow, o.ContextWindow)
	setInt64(&c.ContextWindowBufferTokens, o.ContextWindowBufferTokens)
	setInt64(&c.MaxOutputTokens, o.MaxOutputTokens)
	setInt32(&c.MaxFormatRetries, o.MaxFormatRetries)
	setInt64(&c.ApprovalTimeoutMs, o.ApprovalTimeoutMs)
	setInt64(&c.AnswerTimeoutMs, o.AnswerTimeoutMs)
	if o.ForceSynthesisAtRatio != nil {
		c.ForceSynthesisAtRatio = o.GetForceSynthesisAtRatio()
	}
	if o.StrictMode != nil {
		c.StrictMode = o.GetStrictMode()
	}
	if o.CacheResponses != nil {
		c.CacheResponses = o.GetCacheResponses()
	}
	if o.RejectEndsRun != nil {
		c.RejectEndsRun = o.GetRejectEndsRun()
	}
	if o.StreamAnswers != nil {
		c.StreamAnswers = o.GetStreamAnswers()
	}
	if o.GetToolPolicy() != typev1.ToolPolicy_TOOL_POLICY_UNSPECIFIED {
		c.ToolPolicy = o.GetToolPolicy()
	}
	if len(o.GetAllowedTools()) > 0 {
		c.AllowedTools = slices.Clone(o.GetAllowedTools())
	}
	c.CycleForbid = append(c.CycleForbid, o.GetCycleForbid()...)
	if o.GetToolTransport() != typev1.ToolTransport_TOOL_TRANSPORT_UNSPECIFIED {
		c.ToolTransport = o.GetToolTransport()
	}
	c.ModelProfileId = targetProfile(c.GetTargets())
	return hashed(c), checkContract(c, ceilings)
}

// takeLimits sets the contract's context limits to those of its target with the smallest
// usable window (window − buffer − max output), so that no request to any target of the
// round-robin exceeds its model's window.
func takeLimits(c *typev1.ExecutionContract, limits func(*typev1.Target) (window, buffer, maxOutput int64)) {
	best := int64(-1)
	for _, t := range c.GetTargets() {
		w, b, o := limits(t)
		if usable := w - b - o; best < 0 || usable < best {
			best = usable
			c.ContextWindow, c.ContextWindowBufferTokens, c.MaxOutputTokens = w, b, o
		}
	}
}

// hashed sets the contract's own hash: PRECHECK's transcript entries, and a run that ends
// there, carry the pre-intent contract with its hash (it becomes the sealed contract's parent).
func hashed(c *typev1.ExecutionContract) *typev1.ExecutionContract {
	c.ContractHash = contractHash(c)
	return c
}

func setInt32(dst *int32, v *int32) {
	if v != nil {
		*dst = *v
	}
}

func setInt64(dst *int64, v *int64) {
	if v != nil {
		*dst = *v
	}
}

// MaxTimeoutMs is the longest timeout a contract accepts: 30 days (larger values would
// overflow time.Duration arithmetic), the bound the configuration's defaults have too.
const MaxTimeoutMs = config.MaxTimeoutMS

// MaxStrictFormatRetries is the most max_format_retries a contract under strict_mode takes
// (config.MaxStrictFormatRetries).
const MaxStrictFormatRetries = config.MaxStrictFormatRetries

// checkContract rejects values no run can use, and those beyond the operator's ceilings
// (checkRunLimits); each message names the field.
func checkContract(c *typev1.ExecutionContract, ceilings *config.RunLimits) error {
	switch {
	case c.GetMaxTurns() < 1:
		return stageerr.Invalid("overrides.max_turns must be at least 1, got %d", c.GetMaxTurns())
	case c.GetMaxToolCallsPerTurn() < 1:
		return stageerr.Invalid("overrides.max_tool_calls_per_turn must be at least 1, got %d", c.GetMaxToolCallsPerTurn())
	case c.GetMaxToolCallsTotal() < 0:
		return stageerr.Invalid("overrides.max_tool_calls_total must not be negative, got %d", c.GetMaxToolCallsTotal())
	case c.GetMaxRetries() < 1:
		return stageerr.Invalid("overrides.max_retries must be at least 1, got %d", c.GetMaxRetries())
	case c.GetToolResponseMaxBytes() < 0:
		return stageerr.Invalid("overrides.tool_response_max_bytes must not be negative, got %d", c.GetToolResponseMaxBytes())
	case !(c.GetForceSynthesisAtRatio() >= 0 && c.GetForceSynthesisAtRatio() <= 1): // NaN too
		return stageerr.Invalid("overrides.force_synthesis_at_ratio must be between 0 and 1, got %g", c.GetForceSynthesisAtRatio())
	case c.GetMaxFormatRetries() < 0:
		return stageerr.Invalid("overrides.max_format_retries must not be negative, got %d", c.GetMaxFormatRetries())
	case c.GetStrictMode() && c.GetMaxFormatRetries() > MaxStrictFormatRetries:
		return stageerr.Invalid("overrides.max_format_retries must be at most %d under strict_mode, got %d",
			MaxStrictFormatRetries, c.GetMaxFormatRetries())
	case c.GetApprovalTimeoutMs() < 1:
		return stageerr.Invalid("overrides.approval_timeout_ms must be positive (a pause of 0 ms could never be decided), got %d", c.GetApprovalTimeoutMs())
	case c.GetAnswerTimeoutMs() < 1:
		return stageerr.Invalid("overrides.answer_timeout_ms must be positive (a question that waits 0 ms could never be answered), got %d", c.GetAnswerTimeoutMs())
	}
	for _, n := range []struct {
		name  string
		count int64
	}{{"max_tokens_consumed", c.GetMaxTokensConsumed()}, {"context_window", c.GetContextWindow()},
		{"context_window_buffer_tokens", c.GetContextWindowBufferTokens()}, {"max_output_tokens", c.GetMaxOutputTokens()}} {
		if n.count < 0 {
			return stageerr.Invalid("overrides.%s must not be negative, got %d", n.name, n.count)
		}
		if n.count > tokens.MaxCount {
			return stageerr.Invalid("overrides.%s must be at most %d tokens, got %d", n.name, int64(tokens.MaxCount), n.count)
		}
	}
	for _, d := range []struct {
		name string
		ms   int64
	}{{"tool_timeout_ms", c.GetToolTimeoutMs()}, {"step_timeout_ms", c.GetStepTimeoutMs()},
		{"total_timeout_ms", c.GetTotalTimeoutMs()}, {"approval_timeout_ms", c.GetApprovalTimeoutMs()},
		{"answer_timeout_ms", c.GetAnswerTimeoutMs()}} {
		if d.ms < 1 {
			return stageerr.Invalid("overrides.%s must be positive, got %d", d.name, d.ms)
		}
		if d.ms > MaxTimeoutMs {
			return stageerr.Invalid("overrides.%s must be at most %d (30 days), got %d", d.name, MaxTimeoutMs, d.ms)
		}
	}
	for _, e := range []struct {
		name  string
		value protoreflect.Enum
	}{{"overrides.tool_policy", c.GetToolPolicy()}, {"overrides.tool_transport", c.GetToolTransport()}, {"output_format", c.GetOutputFormat()}} {
		if e.value.Descriptor().Values().ByNumber(e.value.Number()) == nil {
			return stageerr.Invalid("%s %d is not one of its values", e.name, e.value.Number())
		}
	}
	for i, t := range c.GetTargets() {
		if t.GetProvider() == "" || t.GetModel() == "" {
			return stageerr.Invalid("overrides.targets[%d] needs both provider and model", i)
		}
	}
	for i, p := range c.GetCycleForbid() {
		if p.GetFromTool() == "" || p.GetToTool() == "" {
			return stageerr.Invalid("overrides.cycle_forbid[%d] needs both from_tool and to_tool", i)
		}
	}
	return checkRunLimits(c, ceilings)
}

// preflight reports why a contract cannot run (FAILED_PREFLIGHT), or "" when it can.
func preflight(c *typev1.ExecutionContract, available []*typev1.Tool) string {
	if len(c.GetTargets()) == 0 {
		return "the contract has no provider/model targets"
	}
	has := func(name string) bool {
		return slices.ContainsFunc(available, func(t *typev1.Tool) bool { return t.GetName() == name })
	}
	for _, name := range c.GetAllowedTools() {
		if !has(name) {
			return fmt.Sprintf("allowed tool %q is not available", name)
		}
	}
	// A pair naming a tool the mesh does not have (an MCP tool by its name on its server,
	// notes.search, not notes__search) never matches a call: its rule would go unenforced.
	for i, p := range c.GetCycleForbid() {
		for _, name := range []string{p.GetFromTool(), p.GetToTool()} {
			if !has(name) {
				return fmt.Sprintf("cycle_forbid[%d] [%q, %q] names tool %q, which is not available (available: %s)",
					i, p.GetFromTool(), p.GetToTool(), name, strings.Join(toolname.Of(available), ", "))
			}
		}
	}
	if w := c.GetContextWindow(); w > 0 && c.GetContextWindowBufferTokens()+c.GetMaxOutputTokens() >= w {
		return fmt.Sprintf("reserved context (buffer %d + max output %d tokens) does not fit the %d-token window",
			c.GetContextWindowBufferTokens(), c.GetMaxOutputTokens(), w)
	}
	return cmp.Or(requiredNeedsTurns(c, ""), requiredWithoutTools(c, available, ""))
}

// systemOverflows says why the run's system message leaves no room for a turn in the context
// window, or "": it is in every request, and the guard's limit (the window less its buffer and
// the output reserved) must hold it and the user's message (seed 001's context feasibility,
// reserved_system + reserved_synthesis + margin <= context_window). Such a run could only end
// MAX_CONTEXT_REACHED, a fault of its setup rather than of the conversation.
func (r *run) systemOverflows() string {
	limit := r.limit()
	if limit <= 0 || len(r.conversation) == 0 || r.conversation[0].GetRole() != typev1.Role_ROLE_SYSTEM {
		return ""
	}
	c := r.contract
	if n := r.counter.Message(r.conversation[0]); n >= limit {
		return fmt.Sprintf("the system message (%d tokens) leaves no room for the user's message in the %d-token window (buffer %d + max output %d tokens reserved)",
			n, c.GetContextWindow(), c.GetContextWindowBufferTokens(), c.GetMaxOutputTokens())
	}
	return ""
}

// requiredWithoutTools says why the contract's tool_policy required can never be met, or "":
// no tool the run may use (of available, within allowed_tools) is there to call. source says
// where the policy came from, for the reason.
func requiredWithoutTools(c *typev1.ExecutionContract, available []*typev1.Tool, source string) string {
	if c.GetToolPolicy() != typev1.ToolPolicy_TOOL_POLICY_REQUIRED || len(offeredTools(c, available)) > 0 {
		return ""
	}
	return fmt.Sprintf("tool_policy required%s needs a tool the run may use, and none is available", source)
}

// requiredNeedsTurns says why the contract's tool_policy required can never be met, or "": the
// last turn under max_turns is a final turn that offers no tool, so a tool can run only in an
// earlier one. source says where the policy came from, for the reason.
func requiredNeedsTurns(c *typev1.ExecutionContract, source string) string {
	if c.GetToolPolicy() != typev1.ToolPolicy_TOOL_POLICY_REQUIRED || c.GetMaxTurns() >= 2 {
		return ""
	}
	return fmt.Sprintf("tool_policy required%s needs max_turns of at least 2: the last turn offers only %s, so a tool can run only in an earlier one; max_turns is %d",
		source, FinalReportTool, c.GetMaxTurns())
}

// unknownProvider says which target (or the fallback target) names a provider the generation
// stage does not have, or "". The stage's list answers for a second (providerCache). A
// generation stage that cannot list its providers (an older implementation of the proto) is
// not checked here: its first attempt tells.
func (r *run) unknownProvider(ctx context.Context) string {
	if r.svc.providers.covers(r.contract) {
		return ""
	}
	resp, err := whenReady(ctx, "generation", r.svc.peers.Generation.ListProviders, &generationv1.ListProvidersRequest{})
	if err != nil {
		return ""
	}
	r.svc.providers.take(resp.GetProviders())
	for i, t := range r.contract.GetTargets() {
		if !slices.Contains(resp.GetProviders(), t.GetProvider()) {
			return fmt.Sprintf("targets[%d] names provider %q, which the generation stage does not have (it has: %s)",
				i, t.GetProvider(), strings.Join(resp.GetProviders(), ", "))
		}
	}
	if fb := r.contract.GetFallbackTarget(); fb != nil && !slices.Contains(resp.GetProviders(), fb.GetProvider()) {
		return fmt.Sprintf("fallback_target names provider %q, which the generation stage does not have (it has: %s)",
			fb.GetProvider(), strings.Join(resp.GetProviders(), ", "))
	}
	return ""
}

// seal fixes the contract: sets its parent (the pre-intent contract) and its own hash.
func seal(c *typev1.ExecutionContract, parentHash string) *typev1.ExecutionContract {
	sealed := proto.CloneOf(c)
	sealed.ParentContractHash = parentHash
	sealed.ContractHash = contractHash(sealed)
	return sealed
}

// contractHash is the hex SHA-256 of the contract's deterministic serialisation with its own
// hash field empty, as transcript.VerifyResult checks it.
func contractHash(c *typev1.ExecutionContract) string { return transcript.ContractHash(c) }
