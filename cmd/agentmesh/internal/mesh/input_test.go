package mesh_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/orchestrator"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// stringField is the wire encoding of a string (or bytes, or message) field.
func stringField(num protowire.Number, value []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), value)
}

// TestUndecodableRequestsAreInvalid (issue 11.5): a request that is not protobuf, or whose
// string holds invalid UTF-8, is INVALID_ARGUMENT naming the message type and the problem,
// on the public API (unary and streaming) and on a stage, not INTERNAL.
func TestUndecodableRequestsAreInvalid(t *testing.T) {
	h := start(t, nil)
	notUTF8 := []byte{'h', 0xff, 0xfe, 'i'}
	runRequest := "agentmesh.agent.v1.RunRequest"
	tests := []struct {
		name, service, method string
		streams               bool
		body                  []byte
		want                  []string
	}{
		{"not protobuf", mesh.Orchestrator, "/agentmesh.agent.v1.AgentService/Run", false,
			[]byte{0x0a, 0x80}, []string{runRequest, "invalid wire-format data"}},
		{"user_id not UTF-8", mesh.Orchestrator, "/agentmesh.agent.v1.AgentService/Run", false,
			stringField(1, notUTF8), []string{runRequest, "agentmesh.agent.v1.RunRequest.user_id contains invalid UTF-8"}},
		{"history content not UTF-8", mesh.Orchestrator, "/agentmesh.agent.v1.AgentService/Run", false,
			append(stringField(3, []byte("hi")), stringField(4, stringField(2, notUTF8))...),
			[]string{runRequest, "agentmesh.type.v1.Message.content contains invalid UTF-8"}},
		{"streamed message not UTF-8", mesh.Orchestrator, "/agentmesh.agent.v1.AgentService/StreamRun", true,
			stringField(3, notUTF8), []string{runRequest, "agentmesh.agent.v1.RunRequest.message contains invalid UTF-8"}},
		{"stage request not protobuf", mesh.Intent, "/agentmesh.intent.v1.IntentService/Parse", false,
			[]byte{0xff}, []string{"agentmesh.intent.v1.ParseRequest"}},
		{"stage request not UTF-8", mesh.Intent, "/agentmesh.intent.v1.IntentService/Parse", false,
			stringField(1, notUTF8), []string{"agentmesh.intent.v1.ParseRequest.message contains invalid UTF-8"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := grpc.NewClient(h.mesh.Addr(tc.service), grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithDefaultCallOptions(grpc.ForceCodecV2(grpctest.RawCodec{})))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			var reply []byte
			if tc.streams {
				err = streamOnce(t, conn, tc.method, tc.body)
			} else {
				err = conn.Invoke(t.Context(), tc.method, &tc.body, &reply)
			}
			msg := status.Convert(err).Message()
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("err = %v, want INVALID_ARGUMENT", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q does not say %q", msg, w)
				}
			}
		})
	}
}

// streamOnce sends body on a server-streaming method and returns the error that ends the
// stream.
func streamOnce(t *testing.T, conn *grpc.ClientConn, method string, body []byte) error {
	t.Helper()
	stream, err := conn.NewStream(t.Context(), &grpc.StreamDesc{ServerStreams: true}, method)
	if err != nil {
		return err
	}
	if err := stream.SendMsg(&body); err != nil {
		return err
	}
	if err := stream.CloseSend(); err != nil {
		return err
	}
	for {
		var event []byte
		if err := stream.RecvMsg(&event); err != nil {
			if err == io.EOF {
				t.Fatal("the stream ended without an error")
			}
			return err
		}
	}
}

// TestConfiguredMessageLimit (issue 11.6): grpc.max_message_bytes is the limit of every server
// and client of the mesh: over it, a request to the public API is RESOURCE_EXHAUSTED saying
// both sizes, and so is a tool result between stages, which the model sees as the tool's
// failure. (TestLargeToolResultIsTruncated runs a result over gRPC's 4 MiB with the default.)
func TestConfiguredMessageLimit(t *testing.T) {
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(strings.Repeat("x", 2<<20)))
	}))
	t.Cleanup(huge.Close)
	cfg := config.Default()
	cfg.GRPC.MaxMessageBytes = 1 << 20
	cfg.RestTools = map[string]config.RestTool{"dump": {Description: "Dumps everything.", URL: huge.URL}}
	h := start(t, cfg, llmtest.Scenario{Name: "dump", Match: "dump everything", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{ID: "d", Name: "dump", Arguments: `{}`}}}, text("that was a lot"),
	}})

	_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi", History: []*typev1.Message{
		{Role: typev1.Role_ROLE_USER, Content: strings.Repeat("x", 1<<20)},
	}})
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), "vs. 1048576") {
		t.Fatalf("a request over the configured limit: %v, want RESOURCE_EXHAUSTED naming the limit", err)
	}

	res := h.run(t, &agentv1.RunRequest{Message: "dump everything"})
	if got := toolMessage(t, res, 0); !strings.HasPrefix(got, "(tool failed: ") || !strings.Contains(got, "larger than max (") || !strings.HasSuffix(got, " vs. 1048576))") {
		t.Errorf("tool message %q, want the result refused over the configured limit", got)
	}
}

// history returns n user messages whose encodings add up to size bytes.
func history(t *testing.T, n, size int) []*typev1.Message {
	t.Helper()
	h := make([]*typev1.Message, n)
	left := size
	for i := range h {
		want := left / (n - i)
		// The encoding is the role (2 bytes) and the content's tag, length and bytes.
		h[i] = &typev1.Message{Role: typev1.Role_ROLE_USER, Content: strings.Repeat("x", want-2-1-protowire.SizeVarint(uint64(want)))}
		if proto.Size(h[i]) < want {
			h[i].Content += "x"
		}
		for proto.Size(h[i]) > want {
			h[i].Content = h[i].Content[1:]
		}
		left -= proto.Size(h[i])
	}
	if left != 0 {
		t.Fatalf("history of %d messages is %d bytes off %d", n, left, size)
	}
	return h
}

// TestRequestSizeLimits (issue 11.5): every size limit of a RunRequest (README, "Limits")
// takes a request at the limit and refuses one just over it with INVALID_ARGUMENT naming the
// field and the limit, before the run starts; Decide has the same limits.
func TestRequestSizeLimits(t *testing.T) {
	h := start(t, nil)
	limits := []struct {
		name      string
		at, over  *agentv1.RunRequest
		overError string
	}{
		{"message",
			&agentv1.RunRequest{Message: strings.Repeat("a", orchestrator.MaxMessageBytes)},
			&agentv1.RunRequest{Message: strings.Repeat("a", orchestrator.MaxMessageBytes+1)},
			"message: at most 65536 bytes, got 65537"},
		{"user_id",
			&agentv1.RunRequest{Message: "hi", UserId: strings.Repeat("u", orchestrator.MaxUserIDBytes)},
			&agentv1.RunRequest{Message: "hi", UserId: strings.Repeat("u", orchestrator.MaxUserIDBytes+1)},
			"user_id: at most 256 bytes, got 257"},
		{"conversation_id",
			&agentv1.RunRequest{Message: "hi", ConversationId: strings.Repeat("c", orchestrator.MaxConversationIDBytes)},
			&agentv1.RunRequest{Message: "hi", ConversationId: strings.Repeat("c", orchestrator.MaxConversationIDBytes+1)},
			"conversation_id: at most 256 bytes, got 257"},
		{"idempotency_key",
			&agentv1.RunRequest{Message: "hi", IdempotencyKey: strings.Repeat("k", orchestrator.MaxIdempotencyKeyBytes)},
			&agentv1.RunRequest{Message: "hi", IdempotencyKey: strings.Repeat("k", orchestrator.MaxIdempotencyKeyBytes+1)},
			"idempotency_key: at most 256 bytes, got 257"},
		{"history messages",
			&agentv1.RunRequest{Message: "hi", History: history(t, orchestrator.MaxHistoryMessages, 10*orchestrator.MaxHistoryMessages)},
			&agentv1.RunRequest{Message: "hi", History: history(t, orchestrator.MaxHistoryMessages+1, 10*(orchestrator.MaxHistoryMessages+1))},
			"history: at most 1000 messages, got 1001"},
		{"history bytes",
			&agentv1.RunRequest{Message: "hi", History: history(t, 8, orchestrator.MaxHistoryBytes)},
			&agentv1.RunRequest{Message: "hi", History: history(t, 8, orchestrator.MaxHistoryBytes+1)},
			"history: at most 2097152 bytes in all, got 2097153"},
	}
	for _, l := range limits {
		t.Run(l.name, func(t *testing.T) {
			_, err := h.client.Run(t.Context(), l.over)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), l.overError) {
				t.Errorf("just over the limit: %v, want INVALID_ARGUMENT saying %q", err, l.overError)
			}
			res, err := h.client.Run(t.Context(), l.at)
			if err != nil {
				t.Fatalf("at the limit: %v", err)
			}
			if res.GetError().GetCode() == "INVALID_INPUT" {
				t.Errorf("at the limit, the run failed on its input: %v", res.GetError())
			}
		})
	}
	t.Run("decide", func(t *testing.T) {
		_, err := h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: "hi", UserId: strings.Repeat("u", orchestrator.MaxUserIDBytes+1)})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "user_id: at most 256 bytes") {
			t.Errorf("Decide with a user_id over the limit: %v, want INVALID_ARGUMENT", err)
		}
		_, err = h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: "hi", ConversationId: strings.Repeat("c", orchestrator.MaxConversationIDBytes+1)})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "conversation_id: at most 256 bytes") {
			t.Errorf("Decide with a conversation_id over the limit: %v, want INVALID_ARGUMENT", err)
		}
		over := history(t, orchestrator.MaxHistoryMessages+1, 10*(orchestrator.MaxHistoryMessages+1))
		_, err = h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: "hi", MessageHistory: over})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "message_history: at most 1000 messages") {
			t.Errorf("Decide with a history over the limit: %v, want INVALID_ARGUMENT", err)
		}
	})
}
