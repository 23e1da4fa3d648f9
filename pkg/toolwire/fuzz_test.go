package toolwire

import (
	"bytes"
	"testing"

	contextv1 "github.com/agentmesh/agentmesh/gen/agentmesh/context/v1"
	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// fuzzSeeds are encodings of requests with tools, for the fuzz tests to start from.
func fuzzSeeds(f *testing.F) {
	schema, _ := structpb.NewStruct(map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}})
	tools := []*typev1.Tool{{Name: "a", Description: "first", InputSchema: schema}, {Name: "b"}}
	for _, m := range []proto.Message{
		&generationv1.GenerateStreamRequest{Request: &generationv1.GenerateRequest{RunId: "r", Tools: tools,
			Messages: []*typev1.Message{{Role: typev1.Role_ROLE_USER, Content: "hi"}}}},
		&contextv1.AssembleRequest{RunId: "r", Tools: tools, MaxTokens: 100},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0x02, 0x22, 0x00}) // request { tools { } }
	f.Add([]byte{0x0a, 0x01, 0x22})       // truncated
}

// FuzzUnmarshalIsProtobufs: whatever the bytes, Unmarshal fails when protobuf's decoding
// fails and otherwise decodes what protobuf decodes.
func FuzzUnmarshalIsProtobufs(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, pair := range [][2]proto.Message{
			{&generationv1.GenerateStreamRequest{}, &generationv1.GenerateStreamRequest{}},
			{&contextv1.AssembleRequest{}, &contextv1.AssembleRequest{}},
		} {
			got, want := pair[0], pair[1]
			err, werr := Unmarshal(b, got), proto.Unmarshal(b, want)
			if (err == nil) != (werr == nil) {
				t.Fatalf("%T: error %v, protobuf's %v", got, err, werr)
			}
			if err == nil && !proto.Equal(got, want) {
				t.Fatalf("%T: decoded %v, protobuf decodes %v", got, got, want)
			}
		}
	})
}

// FuzzDeterministicIsProtobufs: whatever request the bytes decode to, its tools shared, its
// deterministic encoding by AppendMarshal is protobuf's, byte for byte.
func FuzzDeterministicIsProtobufs(f *testing.F) {
	fuzzSeeds(f)
	det := proto.MarshalOptions{Deterministic: true}
	f.Fuzz(func(t *testing.T, b []byte) {
		req := &generationv1.GenerateStreamRequest{}
		if proto.Unmarshal(b, req) != nil {
			return
		}
		want, err := det.Marshal(req)
		if err != nil {
			return
		}
		Share(req.GetRequest().GetTools()...)
		got, err := AppendMarshal(nil, req, det)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("AppendMarshal\n%x\nprotobuf\n%x", got, want)
		}
	})
}
