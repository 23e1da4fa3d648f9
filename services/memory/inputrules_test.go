package memory_test

import (
	"math"
	"testing"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/pkg/recall"
	"github.com/agentmesh/agentmesh/services/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestSearchLimitOverTheMaximum: a limit over recall.MaxHits is refused, naming the
// field and the rule, not silently cut to the maximum; the maximum itself is taken.
func TestSearchLimitOverTheMaximum(t *testing.T) {
	c := newClient(t, memory.Options{})
	store(t, c, "u", "", "a note about golang")
	resp, err := c.Search(t.Context(), &memoryv1.SearchRequest{UserId: "u", Query: "golang",
		Limit: recall.MaxHits})
	if err != nil || len(resp.GetHits()) != 1 {
		t.Fatalf("limit %d: %v, %v; want the one hit", recall.MaxHits, resp.GetHits(), err)
	}
	_, err = c.Search(t.Context(), &memoryv1.SearchRequest{UserId: "u", Query: "golang",
		Limit: recall.MaxHits + 1})
	grpctest.WantStageError(t, err, codes.InvalidArgument,
		typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, "limit must be at most 100, got 101")
}

// TestMetadataNotANumber: metadata numbers that JSON cannot hold (NaN, ±Inf), at any depth,
// are refused naming their key, instead of a memory that every JSON reader of it then fails
// on; finite numbers are stored.
func TestMetadataNotANumber(t *testing.T) {
	c := newClient(t, memory.Options{})
	num := structpb.NewNumberValue
	table := []struct {
		name string
		meta map[string]*structpb.Value
		want string
	}{
		{"NaN", map[string]*structpb.Value{"page": num(3), "score": num(math.NaN())},
			`metadata["score"]: must be a finite number, got NaN`},
		{"+Inf", map[string]*structpb.Value{"score": num(math.Inf(1))},
			`metadata["score"]: must be a finite number, got +Inf`},
		{"nested -Inf", map[string]*structpb.Value{"source": structpb.NewStructValue(&structpb.Struct{
			Fields: map[string]*structpb.Value{"offset": num(math.Inf(-1))}})},
			`metadata["source"]["offset"]: must be a finite number, got -Inf`},
		{"in a list", map[string]*structpb.Value{"pages": structpb.NewListValue(&structpb.ListValue{
			Values: []*structpb.Value{num(1), num(math.NaN())}})},
			`metadata["pages"][1]: must be a finite number, got NaN`},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Store(t.Context(), &memoryv1.StoreRequest{UserId: "u", Content: user("a note"),
				Metadata: &structpb.Struct{Fields: tc.meta}})
			grpctest.WantStageError(t, err, codes.InvalidArgument,
				typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, tc.want)
		})
	}
	resp, err := c.Store(t.Context(), &memoryv1.StoreRequest{UserId: "u", Content: user("a note"),
		Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{"page": num(3.5)}}})
	if err != nil || !resp.GetStored() {
		t.Errorf("finite metadata: %v, %v; want it stored", resp, err)
	}
}

// TestMetadataValueOfNoKind: a metadata value that is none of JSON's (a google.protobuf.Value
// with no kind set), at any depth, is refused naming its key, as a number JSON cannot hold is:
// the memory was stored, and every JSON reader of it (protojson, the CLI's --json) then failed.
func TestMetadataValueOfNoKind(t *testing.T) {
	c := newClient(t, memory.Options{})
	table := []struct {
		name string
		meta map[string]*structpb.Value
		want string
	}{
		{"at the top", map[string]*structpb.Value{"page": structpb.NewNumberValue(3), "source": {}},
			`metadata["source"]: must be null, a number, a string, a bool, an object or a list; it is none`},
		{"nested", map[string]*structpb.Value{"source": structpb.NewStructValue(&structpb.Struct{
			Fields: map[string]*structpb.Value{"offset": {}}})},
			`metadata["source"]["offset"]: must be null, a number, a string, a bool, an object or a list; it is none`},
		{"in a list", map[string]*structpb.Value{"pages": structpb.NewListValue(&structpb.ListValue{
			Values: []*structpb.Value{structpb.NewNullValue(), {}}})},
			`metadata["pages"][1]: must be null, a number, a string, a bool, an object or a list; it is none`},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Store(t.Context(), &memoryv1.StoreRequest{UserId: "u", Content: user("a note"),
				Metadata: &structpb.Struct{Fields: tc.meta}})
			grpctest.WantStageError(t, err, codes.InvalidArgument,
				typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, tc.want)
		})
	}
}

// TestMetadataEmptyKey: a metadata key names what its value is (source, title, run_id); an
// empty one, at any depth, names nothing and is refused naming where it is, on Store and on
// StoreDocument (the document's metadata and a chunk's). It was stored without a word.
func TestMetadataEmptyKey(t *testing.T) {
	c := newClient(t, memory.Options{})
	num := structpb.NewNumberValue
	const want = `: a key must not be empty`
	table := []struct {
		name string
		meta map[string]*structpb.Value
		want string
	}{
		{"at the top", map[string]*structpb.Value{"page": num(3), "": num(1)}, `metadata[""]` + want},
		{"nested", map[string]*structpb.Value{"source": structpb.NewStructValue(&structpb.Struct{
			Fields: map[string]*structpb.Value{"": num(1)}})}, `metadata["source"][""]` + want},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Store(t.Context(), &memoryv1.StoreRequest{UserId: "u", Content: user("a note"),
				Metadata: &structpb.Struct{Fields: tc.meta}})
			grpctest.WantStageError(t, err, codes.InvalidArgument,
				typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, tc.want)
		})
	}
	source := map[string]*structpb.Value{"source": structpb.NewStringValue("a.md")}
	_, err := c.StoreDocument(t.Context(), &memoryv1.StoreDocumentRequest{UserId: "u", Collection: "docs",
		Metadata: &structpb.Struct{Fields: source},
		Chunks:   []*memoryv1.DocumentChunk{{Content: "a chunk", Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{"": num(0)}}}}})
	grpctest.WantStageError(t, err, codes.InvalidArgument,
		typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, `[""]`+want)
}
