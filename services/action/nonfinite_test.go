package action_test

import (
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/services/action"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestANumberJSONCannotHoldIsRefused: the arguments of a call are JSON, which has no NaN or
// infinity, but the protobuf Struct that carries them can hold both. The action stage took
// them wherever the tool's schema did not constrain the number (a JSON schema refuses them
// with "invalid jsonType float64" where it does): the call was recorded as run, and a REST
// tool's JSON body failed with "json: unsupported value: NaN", an execution error its call id
// kept for good. Such a request is INVALID_ARGUMENT naming where the number is, and nothing
// runs.
func TestANumberJSONCannotHoldIsRefused(t *testing.T) {
	var requests atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(api.Close)
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{"note": {
		URL: api.URL + "/notes", Method: http.MethodPost, Body: `{"n": ${parameters.n}}`,
		InputSchema: map[string]any{"type": "object",
			"properties": map[string]any{"n": map[string]any{}}},
	}}
	client := serveEdited(t, cfg, func(o *action.Options) { o.NoApproval = []string{"note"} })
	num := structpb.NewNumberValue
	list := &structpb.ListValue{Values: []*structpb.Value{num(1), num(math.Inf(1))}}
	object := &structpb.Struct{Fields: map[string]*structpb.Value{"a b": num(math.Inf(-1))}}
	for path, n := range map[string]*structpb.Value{
		"arguments.n":        num(math.NaN()),
		"arguments.n[1]":     structpb.NewListValue(list),
		`arguments.n["a b"]`: structpb.NewStructValue(object),
	} {
		req := request(t, "note", nil)
		req.Arguments = &structpb.Struct{Fields: map[string]*structpb.Value{"n": n}}
		_, err := client.Execute(t.Context(), req)
		grpctest.WantStageError(t, err, codes.InvalidArgument,
			typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, path+": ", "JSON has no")
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("the tool's API got %d requests", n)
	}
}
