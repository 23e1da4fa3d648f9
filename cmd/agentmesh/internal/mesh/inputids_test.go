package mesh_test

import (
	"strings"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"github.com/agentmesh/agentmesh/services/orchestrator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestInputIDLimits: Answer's question_id and ResolveApproval's call_id are at most 512 bytes
// (README, "Limits"); one over is INVALID_ARGUMENT naming the field and the limit. It was
// looked up under a store key holding it hex-encoded and echoed whole in NOT_FOUND: a 1 MiB
// question_id made a NATS subject over the server's control line, which closed the
// orchestrator's connection, and every later call (the ones at the limit here) UNAVAILABLE.
func TestInputIDLimits(t *testing.T) {
	h := start(t, nil)
	calls := []struct {
		field string
		limit int
		call  func(id string) error
	}{
		{"question_id", orchestrator.MaxQuestionIDBytes, func(id string) error {
			req := &agentv1.AnswerRequest{RunId: "no-such-run", Answer: "yes", QuestionId: id}
			_, err := h.client.Answer(t.Context(), req)
			return err
		}},
		{"call_id", orchestrator.MaxCallIDBytes, func(id string) error {
			req := &agentv1.ResolveApprovalRequest{RunId: "no-such-run", CallId: id,
				Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE}
			_, err := h.client.ResolveApproval(t.Context(), req)
			return err
		}},
	}
	for _, c := range calls {
		t.Run(c.field, func(t *testing.T) {
			if c.limit != 512 {
				t.Errorf("limit %d, want the 512 bytes README documents", c.limit)
			}
			if err := c.call(strings.Repeat("q", c.limit)); status.Code(err) != codes.NotFound {
				t.Errorf("at the limit: %v, want NOT_FOUND (no such run)", err)
			}
			for _, n := range []int{c.limit + 1, 1 << 20} {
				err := c.call(strings.Repeat("q", n))
				msg := status.Convert(err).Message()
				if status.Code(err) != codes.InvalidArgument || !strings.Contains(msg, c.field+": at most 512 bytes") {
					t.Errorf("%d bytes: %v, want INVALID_ARGUMENT naming %s and its limit", n, err, c.field)
				}
				if len(msg) > 200 {
					t.Errorf("%d bytes: the error is %d bytes long", n, len(msg))
				}
			}
		})
	}
}
