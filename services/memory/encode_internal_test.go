package memory

import (
	"bytes"
	"testing"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

func TestEncodeResultLeavesOutTheLearningAndNothingElse(t *testing.T) {
	learned := &typev1.RunLearning{Method: typev1.LearningMethod_LEARNING_METHOD_MODEL, MemoryIds: []string{"m1"}}
	result := &typev1.RunResult{
		RunId: "run-1", ExitReason: "DONE", Turns: 3, Learning: learned,
		Conversation: []*typev1.Message{{Role: typev1.Role_ROLE_USER, Content: "hi"}},
		Transcript:   []*typev1.TranscriptEntry{{Seq: 1, Hash: "h1"}},
	}
	raw, err := encodeResult(result)
	if err != nil {
		t.Fatal(err)
	}
	got := &typev1.RunResult{}
	if err := proto.Unmarshal(raw, got); err != nil {
		t.Fatal(err)
	}
	want := proto.CloneOf(result)
	want.Learning = nil
	if !proto.Equal(got, want) {
		t.Errorf("decoded %v, want %v", got, want)
	}
	if result.GetLearning() != learned {
		t.Error("encodeResult changed the caller's result")
	}
}

func TestWithoutFieldRejectsABrokenEncoding(t *testing.T) {
	b := protowire.AppendTag(nil, 1, protowire.BytesType)
	b = protowire.AppendVarint(b, 10) // ten bytes announced, none follow
	if _, err := withoutField(b, 2); err == nil {
		t.Error("a truncated field was accepted")
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	in := []*typev1.TranscriptEntry{{Seq: 1, Hash: "a"}, {}, {Seq: 3, Hash: "c", PrevHash: "b"}}
	for _, e := range in {
		if _, err := protodelim.MarshalTo(&buf, e); err != nil {
			t.Fatal(err)
		}
	}
	records := buf.Bytes()
	out, err := decodeEntries(records)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("%d records, want %d", len(out), len(in))
	}
	for i := range in {
		if !proto.Equal(out[i], in[i]) {
			t.Errorf("record %d: %v, want %v", i, out[i], in[i])
		}
	}
	if _, err := decodeEntries(records[:len(records)-1]); err == nil {
		t.Error("a truncated record was accepted")
	}
}
