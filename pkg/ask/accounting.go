package ask

import (
	"errors"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// Accounting is the run's accounting entry of one Object call that took latency and returned
// a and err: one LLM request to the model's target, ok when the model answered (an unusable
// answer too: it was paid for), failed when generation failed. It is nil when no request was
// made (the question's schema did not compile).
func (m *Model) Accounting(a Answer, err error, latency time.Duration) *typev1.AccountingEntry {
	entry := &typev1.AccountingEntry{
		Type: typev1.AccountingType_ACCOUNTING_TYPE_LLM, Provider: m.Target.GetProvider(), Model: m.Target.GetModel(),
		Status: typev1.AccountingStatus_ACCOUNTING_STATUS_OK, LatencyMs: latency.Milliseconds(), TimestampMs: time.Now().UnixMilli(),
		Tokens: a.Usage, StopReason: a.StopReason, ActualModel: a.Model, CostUsd: a.CostUSD, Attempts: 1,
	}
	switch se := stageerr.As(err); {
	case err == nil, errors.Is(err, ErrUnusable):
	case se != nil:
		entry.Status, entry.Error = typev1.AccountingStatus_ACCOUNTING_STATUS_FAILED, se.Error()
	default:
		return nil
	}
	return entry
}
