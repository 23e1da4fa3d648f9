package mesh_test

import (
	"strings"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestUserIDWithAControlCharacterIsInvalid: every RPC of the public API taking a user_id
// refuses one holding a control character (NUL, a newline, DEL, a C1 control such as the
// 8-bit CSI, U+009B) with INVALID_ARGUMENT naming the field and the rule, before a run starts:
// a run for a user id with NUL ran, and its result could not be saved where memory is on
// PostgreSQL, which keeps no NUL in text; one with a C1 control ran, to be shown raw wherever
// the id is (logs, the JSON of its result), to terminals that obey it.
func TestUserIDWithAControlCharacterIsInvalid(t *testing.T) {
	h := start(t, nil)
	const want = "user_id: must not contain a control character"
	calls := map[string]func(userID string) error{
		"Run": func(userID string) error {
			_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi", UserId: userID})
			return err
		},
		"StreamRun": func(userID string) error {
			req := &agentv1.RunRequest{Message: "hi", UserId: userID}
			stream, err := h.client.StreamRun(t.Context(), req)
			if err != nil {
				return err
			}
			for {
				if _, err := stream.Recv(); err != nil {
					return err
				}
			}
		},
		"Decide": func(userID string) error {
			req := &agentv1.DecideRequest{Message: "hi", UserId: userID}
			_, err := h.client.Decide(t.Context(), req)
			return err
		},
		"ListMemories": func(userID string) error {
			req := &agentv1.ListMemoriesRequest{UserId: userID}
			_, err := h.client.ListMemories(t.Context(), req)
			return err
		},
		"DeleteMemory": func(userID string) error {
			req := &agentv1.DeleteMemoryRequest{UserId: userID, MemoryId: "m"}
			_, err := h.client.DeleteMemory(t.Context(), req)
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			for _, id := range []string{"a\x00b", "a\nb", "a\x7f", "\x1b[31mred", "\u009b31mred", "a\u0085"} {
				err := call(id)
				msg := status.Convert(err).Message()
				if status.Code(err) != codes.InvalidArgument || !strings.Contains(msg, want) {
					t.Errorf("user_id %q: %v, want INVALID_ARGUMENT saying %q", id, err, want)
				}
			}
		})
	}
	t.Run("printable", func(t *testing.T) {
		if err := calls["ListMemories"]("acme/jürgen \u00e9\u00a0\u00bf"); err != nil {
			t.Errorf("a user_id of printable characters: %v", err)
		}
	})
}
