package orchestrator

import (
	"math"
	"strings"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"
)

// The fuzz tests below decode their input as a request of the public API, as the server's
// codec does (input that is not one is the codec's to refuse, and is skipped), and check it as
// the API does before anything runs. Whatever the request, the check does not panic, and a
// request it refuses is INVALID_ARGUMENT whose message begins with the name of a field of the
// request (run_id, overrides.max_turns, history[3].tool_call_id ...). The seeds run in every
// test run; go test -fuzz explores from them.

// FuzzRunRequest checks a RunRequest as Run and StreamRun do: validateRunRequest, the contract
// its overrides make (buildContract, with the defaults and without ceilings), and its output
// schema.
func FuzzRunRequest(f *testing.F) {
	for _, req := range runSeeds() {
		addSeed(f, req)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &agentv1.RunRequest{}
		if proto.Unmarshal(data, req) != nil {
			return
		}
		err := validateRunRequest(req)
		if err == nil {
			_, err = buildContract(DefaultContract(), "run-1", req, false, nil, nil)
		}
		if err == nil {
			if _, serr := compileOutputSchema(req.GetOutputSchema()); serr != nil {
				err = stageerr.Invalid("output_schema is not a valid JSON schema: %v", serr)
			}
		}
		wantFieldError(t, req, err)
	})
}

// FuzzDecideRequest checks a DecideRequest as Decide does before it asks any stage.
func FuzzDecideRequest(f *testing.F) {
	for _, run := range runSeeds() {
		addSeed(f, &agentv1.DecideRequest{UserId: run.GetUserId(), Message: run.GetMessage(),
			ConversationId: run.GetConversationId(), MessageHistory: run.GetHistory(), Surface: run.GetSurface()})
	}
	calc := &typev1.ToolCall{Id: "c1", Name: "calculator", Arguments: &structpb.Struct{}}
	addSeed(f, &agentv1.DecideRequest{Message: "yes", PendingConfirmation: &typev1.PendingAction{ToolCalls: []*typev1.ToolCall{calc}}})
	addSeed(f, &agentv1.DecideRequest{Message: "yes", PendingConfirmation: &typev1.PendingAction{RunId: "run-1", ToolCalls: []*typev1.ToolCall{calc}}})
	addSeed(f, &agentv1.DecideRequest{Message: "yes", PendingConfirmation: &typev1.PendingAction{ToolCalls: []*typev1.ToolCall{calc, calc, {Name: "x"}}}})
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &agentv1.DecideRequest{}
		if proto.Unmarshal(data, req) != nil {
			return
		}
		err := validateInput(req.GetUserId(), req.GetConversationId(), req.GetMessage(), "message_history", req.GetMessageHistory(), req.GetSurface())
		if err == nil {
			err = checkPendingConfirmation(req.GetPendingConfirmation())
		}
		wantFieldError(t, req, err)
	})
}

// FuzzResolveApprovalRequest checks a ResolveApprovalRequest as ResolveApproval does before it
// looks the run up.
func FuzzResolveApprovalRequest(f *testing.F) {
	args, _ := structpb.NewStruct(map[string]any{"expression": "1+1"})
	yes := true
	for _, req := range []*agentv1.ResolveApprovalRequest{
		{RunId: "run-1", CallId: "c1", Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE},
		{RunId: "run-1", CallId: "c1", Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_REJECT, Feedback: "no", EndRun: &yes},
		{RunId: "run-1", CallId: "c1", Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_MODIFY, ModifiedArguments: args},
		{RunId: "run-1", CallId: "c1", Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE, ModifiedArguments: args, EndRun: &yes},
		{RunId: "a.b", CallId: strings.Repeat("c", MaxCallIDBytes+1), Decision: 99},
		{},
	} {
		addSeed(f, req)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &agentv1.ResolveApprovalRequest{}
		if proto.Unmarshal(data, req) != nil {
			return
		}
		wantFieldError(t, req, validateResolveApproval(req))
	})
}

// runSeeds are RunRequests valid and not, one of each rule's kind.
func runSeeds() []*agentv1.RunRequest {
	i32 := func(v int32) *int32 { return &v }
	i64 := func(v int64) *int64 { return &v }
	f64 := func(v float64) *float64 { return &v }
	calc := &typev1.ToolCall{Id: "c1", Name: "calculator", RawArguments: `{"expression":"1+1"}`}
	schema, _ := structpb.NewStruct(map[string]any{"type": "object", "required": []any{"answer"}})
	return []*agentv1.RunRequest{
		{Message: "what is 2+2"},
		{UserId: "alice", ConversationId: "c-1", Message: "hi", IdempotencyKey: "k", RunId: "run-1", Surface: typev1.Surface_SURFACE_CHAT},
		{Message: "hi", History: []*typev1.Message{
			{Role: typev1.Role_ROLE_USER, Content: "1+1?"},
			{Role: typev1.Role_ROLE_ASSISTANT, ToolCalls: []*typev1.ToolCall{calc}},
			{Role: typev1.Role_ROLE_TOOL, ToolCallId: "c1", Content: "2"},
		}},
		{Message: "hi", History: []*typev1.Message{{Role: typev1.Role_ROLE_USER, ToolCallId: "c1", ToolCalls: []*typev1.ToolCall{{}}}}},
		{Message: "hi", OutputFormat: typev1.OutputFormat_OUTPUT_FORMAT_JSON, OutputSchema: schema},
		{Message: "hi", OutputSchema: schema},
		{Message: "hi", Overrides: &agentv1.RunOverrides{MaxTurns: i32(0), ToolTimeoutMs: i64(math.MaxInt64),
			ForceSynthesisAtRatio: f64(math.NaN()), ToolPolicy: 99, Targets: []*typev1.Target{{Provider: "p"}}}},
		{Message: "hi", Overrides: &agentv1.RunOverrides{CycleForbid: []*typev1.ToolPair{{FromTool: "a"}}, AllowedTools: []string{"calculator"}}},
		{Message: "hi", UserId: "a\x00b", RunId: "a.b", Surface: 99, PendingConfirmation: &typev1.PendingAction{}},
	}
}

// addSeed adds req, encoded, to f's corpus.
func addSeed(f *testing.F, req proto.Message) {
	data, err := proto.Marshal(req)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
}

// wantFieldError fails t unless err is nil, or an INVALID_ARGUMENT whose message begins with
// the name of one of req's fields.
func wantFieldError(t *testing.T, req proto.Message, err error) {
	t.Helper()
	if err == nil {
		return
	}
	st := status.Convert(stageerr.ToStatus(err))
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("%v: code %s, want INVALID_ARGUMENT", err, st.Code())
	}
	msg := st.Message()
	name := msg[:strings.IndexFunc(msg+" ", func(r rune) bool { return !(r == '_' || r >= 'a' && r <= 'z') })]
	if req.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(name)) == nil {
		t.Fatalf("%q does not begin with a field of %s", msg, req.ProtoReflect().Descriptor().FullName())
	}
}
