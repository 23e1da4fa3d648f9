package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/tokens"
)

// RunLimits are an operator's ceilings on what one run may use: no run's contract, from the
// defaults or from its request's overrides, goes beyond them (a request that asks for more is
// INVALID_ARGUMENT naming the field and its ceiling). A value of 0 sets no ceiling: the
// contract's own bounds (README, "Limits") only. A budget whose 0 means "no limit"
// (max_tool_calls_total, max_tokens_consumed, tool_response_max_bytes) may not be 0 under a
// ceiling, and the defaults' 0 becomes the ceiling itself. Targets bound the models a run's
// attempts go to.
type RunLimits struct {
	// MaxTurns is the most turns a run may have.
	MaxTurns int32 `yaml:"max_turns"`
	// MaxToolCallsPerTurn is the most tool calls one turn may execute.
	MaxToolCallsPerTurn int32 `yaml:"max_tool_calls_per_turn"`
	// MaxToolCallsTotal is the most tool calls a run may make.
	MaxToolCallsTotal int32 `yaml:"max_tool_calls_total"`
	// MaxRetries is the most LLM attempts a turn may make.
	MaxRetries int32 `yaml:"max_retries"`
	// MaxTokensConsumed is the most tokens a run may consume.
	MaxTokensConsumed int64 `yaml:"max_tokens_consumed"`
	// ToolTimeoutMS is the longest a tool call may be given.
	ToolTimeoutMS int64 `yaml:"tool_timeout_ms"`
	// StepTimeoutMS is the longest a turn may be given.
	StepTimeoutMS int64 `yaml:"step_timeout_ms"`
	// TotalTimeoutMS is the longest a run may last.
	TotalTimeoutMS int64 `yaml:"total_timeout_ms"`
	// ApprovalTimeoutMS is the longest a tool call may wait for approval.
	ApprovalTimeoutMS int64 `yaml:"approval_timeout_ms"`
	// AnswerTimeoutMS is the longest a run may wait for its user's answer.
	AnswerTimeoutMS int64 `yaml:"answer_timeout_ms"`
	// ToolResponseMaxBytes is the largest tool result a run may take whole (before it is
	// summarised or truncated).
	ToolResponseMaxBytes int64 `yaml:"tool_response_max_bytes"`
	// Targets are the provider/model pairs a run may have its attempts sent to (its request's
	// overrides.targets, as the configuration's targets and profiles' targets); a model of "*"
	// is any model of the provider. Empty: any model of any configured provider.
	Targets []Target `yaml:"targets,omitempty"`
}

// AnyModel is the model of a RunLimits target that stands for every model of its provider.
const AnyModel = "*"

// IsZero reports whether l sets no ceiling at all.
func (l RunLimits) IsZero() bool {
	return len(l.Targets) == 0 && slices.IndexFunc(l.Ceilings(), func(c Ceiling) bool {
		return c.Max != 0
	}) < 0
}

// Allows reports whether a run may send its attempts to the provider's model.
func (l RunLimits) Allows(provider, model string) bool {
	return len(l.Targets) == 0 || slices.ContainsFunc(l.Targets, func(t Target) bool {
		return t.Provider == provider && (t.Model == AnyModel || t.Model == model)
	})
}

// TargetRefusal says why a run may not send its attempts to the provider's model, for a
// message that names the field first.
func (l RunLimits) TargetRefusal(provider, model string) string {
	allowed := make([]string, len(l.Targets))
	for i, t := range l.Targets {
		allowed[i] = t.Provider + "/" + t.Model
	}
	return fmt.Sprintf("%s/%s is not one of run_limits.targets (%s)", provider, model,
		strings.Join(allowed, ", "))
}

// Ceiling is one of RunLimits: a field of a run's contract and the most it may be.
type Ceiling struct {
	// Field names it in the configuration (run_limits.<Field>, defaults.<Field>) and in a
	// request's overrides (overrides.<Field>), e.g. max_turns.
	Field string
	// Max is the ceiling; 0 sets none.
	Max int64
	// ZeroIsUnlimited says that the contract's 0 is no limit at all (tool_response_max_bytes,
	// max_tool_calls_total, max_tokens_consumed), which a ceiling does not allow.
	ZeroIsUnlimited bool
}

// Allows reports whether a contract's value v keeps within the ceiling.
func (c Ceiling) Allows(v int64) bool {
	return c.Max == 0 || v <= c.Max && (v != 0 || !c.ZeroIsUnlimited)
}

// Refusal says why v goes beyond the ceiling, e.g. "must be at most 20 (run_limits.max_turns),
// got 50", for a message that names the field first.
func (c Ceiling) Refusal(v int64) string {
	if v == 0 && c.ZeroIsUnlimited {
		return fmt.Sprintf("must not be 0 (no limit) under run_limits.%s: at most %d", c.Field, c.Max)
	}
	return fmt.Sprintf("must be at most %d (run_limits.%s), got %d", c.Max, c.Field, v)
}

// Ceilings lists the limits, in the order of the contract's fields.
func (l RunLimits) Ceilings() []Ceiling {
	return []Ceiling{
		{Field: "max_turns", Max: int64(l.MaxTurns)},
		{Field: "max_tool_calls_per_turn", Max: int64(l.MaxToolCallsPerTurn)},
		{Field: "max_tool_calls_total", Max: int64(l.MaxToolCallsTotal), ZeroIsUnlimited: true},
		{Field: "max_retries", Max: int64(l.MaxRetries)},
		{Field: "max_tokens_consumed", Max: l.MaxTokensConsumed, ZeroIsUnlimited: true},
		{Field: "tool_timeout_ms", Max: l.ToolTimeoutMS},
		{Field: "step_timeout_ms", Max: l.StepTimeoutMS},
		{Field: "total_timeout_ms", Max: l.TotalTimeoutMS},
		{Field: "tool_response_max_bytes", Max: l.ToolResponseMaxBytes, ZeroIsUnlimited: true},
		{Field: "approval_timeout_ms", Max: l.ApprovalTimeoutMS},
		{Field: "answer_timeout_ms", Max: l.AnswerTimeoutMS},
	}
}

// limited returns the defaults' value of each field RunLimits bounds, by Ceiling.Field.
func (d Defaults) limited() map[string]int64 {
	return map[string]int64{
		"max_turns":               int64(d.MaxTurns),
		"max_tool_calls_per_turn": int64(d.MaxToolCallsPerTurn),
		"max_tool_calls_total":    int64(d.MaxToolCallsTotal),
		"max_retries":             int64(d.MaxRetries),
		"max_tokens_consumed":     d.MaxTokensConsumed,
		"tool_timeout_ms":         d.ToolTimeoutMS,
		"step_timeout_ms":         d.StepTimeoutMS,
		"total_timeout_ms":        d.TotalTimeoutMS,
		"tool_response_max_bytes": d.ToolResponseMaxBytes,
		"approval_timeout_ms":     d.ApprovalTimeoutMS,
		"answer_timeout_ms":       d.AnswerTimeoutMS,
	}
}

// fillRunLimits gives each budget the defaults leave unlimited (0) the ceiling run_limits sets
// for it, so that a configuration that sets a ceiling does not also have to lower its default.
func (c *Config) fillRunLimits() {
	l, d := c.RunLimits, &c.Defaults
	if d.MaxToolCallsTotal == 0 {
		d.MaxToolCallsTotal = l.MaxToolCallsTotal
	}
	if d.MaxTokensConsumed == 0 {
		d.MaxTokensConsumed = l.MaxTokensConsumed
	}
	if d.ToolResponseMaxBytes == 0 {
		d.ToolResponseMaxBytes = l.ToolResponseMaxBytes
	}
}

// validateRunLimits checks each ceiling (not negative, within the contract's own bounds) and
// that the defaults keep within it, and that the targets it allows are configured and include
// those of the configuration and its profiles.
func (c *Config) validateRunLimits(p *problems) {
	l := c.RunLimits
	for i, t := range l.Targets {
		c.checkTarget(p, fmt.Sprintf("run_limits.targets[%d]", i), t)
	}
	for i, t := range c.Targets {
		if !l.Allows(t.Provider, t.Model) {
			p.addf("targets[%d]: %s", i, l.TargetRefusal(t.Provider, t.Model))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Profiles)) {
		for i, t := range c.Profiles[name].Targets {
			if !l.Allows(t.Provider, t.Model) {
				p.addf("profiles.%s.targets[%d]: %s", name, i, l.TargetRefusal(t.Provider, t.Model))
			}
		}
	}
	values := c.Defaults.limited()
	for _, ceiling := range c.RunLimits.Ceilings() {
		switch max := ceiling.Max; {
		case max < 0:
			p.addf("run_limits.%s: must not be negative (0 sets no ceiling), got %d", ceiling.Field, max)
		case ceiling.Field == "max_tokens_consumed" && max > tokens.MaxCount:
			p.addf("run_limits.%s: must be at most %d tokens, got %d", ceiling.Field, int64(tokens.MaxCount), max)
		case !ceiling.Allows(values[ceiling.Field]):
			p.addf("defaults.%s: %s", ceiling.Field, ceiling.Refusal(values[ceiling.Field]))
		}
	}
}
