package orchestrator

import (
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/protobuf/proto"
)

// validateResolveApproval checks a ResolveApprovalRequest against the API's rules before the
// run is looked up: a run id, a call id within MaxCallIDBytes, a decision the enum names, the
// fields of the decision alone, and the limits of feedback and modified_arguments.
func validateResolveApproval(req *agentv1.ResolveApprovalRequest) error {
	if err := checkRunID(req.GetRunId()); err != nil {
		return err
	}
	switch {
	case req.GetCallId() == "":
		return stageerr.Invalid("call_id must not be empty")
	case len(req.GetCallId()) > MaxCallIDBytes:
		return stageerr.Invalid("call_id: at most %d bytes, got %d",
			MaxCallIDBytes, len(req.GetCallId()))
	case req.GetDecision() == agentv1.ApprovalDecision_APPROVAL_DECISION_UNSPECIFIED,
		agentv1.ApprovalDecision_name[int32(req.GetDecision())] == "":
		return stageerr.Invalid("decision must be approve, reject or modify, got %d", req.GetDecision())
	case req.GetDecision() == agentv1.ApprovalDecision_APPROVAL_DECISION_MODIFY && req.GetModifiedArguments() == nil:
		return stageerr.Invalid("decision modify needs modified_arguments")
	case req.GetModifiedArguments() != nil && req.GetDecision() != agentv1.ApprovalDecision_APPROVAL_DECISION_MODIFY:
		return stageerr.Invalid("modified_arguments is only for decision modify, got %s", req.GetDecision())
	case req.EndRun != nil && req.GetDecision() != agentv1.ApprovalDecision_APPROVAL_DECISION_REJECT:
		return stageerr.Invalid("end_run is only for decision reject, got %s", req.GetDecision())
	case len(req.GetFeedback()) > MaxFeedbackBytes:
		return stageerr.Invalid("feedback: at most %d bytes, got %d", MaxFeedbackBytes, len(req.GetFeedback()))
	}
	if n := proto.Size(req.GetModifiedArguments()); n > MaxModifiedArgumentsBytes {
		return stageerr.Invalid("modified_arguments: at most %d bytes encoded, got %d", MaxModifiedArgumentsBytes, n)
	}
	return nil
}
