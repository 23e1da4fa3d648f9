package mesh_test

import (
	"strings"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestIDsWithAControlCharacterAreInvalid: a request's conversation_id (Run, Decide) and
// idempotency_key (Run) hold no control character (C0, DEL, C1), as its user_id: each is an id
// (any UUID or hash), shown in logs, errors and a run's events. A NUL or an escape sequence
// was taken, and the run started.
func TestIDsWithAControlCharacterAreInvalid(t *testing.T) {
	h := start(t, nil)
	calls := map[string]func(id string) error{
		"Run conversation_id": func(id string) error {
			_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi", ConversationId: id})
			return err
		},
		"Decide conversation_id": func(id string) error {
			_, err := h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: "hi", ConversationId: id})
			return err
		},
		"Run idempotency_key": func(id string) error {
			_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi", IdempotencyKey: id})
			return err
		},
	}
	for name, call := range calls {
		field := strings.Fields(name)[1]
		t.Run(name, func(t *testing.T) {
			for _, id := range []string{"c\x00", "c\x1b[31m", "c\x7f", "c\u009b"} {
				err := call(id)
				if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), field+": must not contain a control character") {
					t.Errorf("%q: %v, want INVALID_ARGUMENT naming %s", id, err, field)
				}
			}
			if err := call("0b5c6f0e-2a4f-4d51-9a8e-2b8a8f8a0c1d é"); err != nil {
				t.Errorf("an id without a control character: %v", err)
			}
		})
	}
}
