package toolwire

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// tool is a tool whose schema has maps at several levels, so that its encoding depends on
// the order maps are walked in unless it is deterministic.
func tool(t *testing.T, name string) *typev1.Tool {
	t.Helper()
	props := map[string]any{}
	for i := range 12 {
		props[fmt.Sprintf("p%02d", i)] = map[string]any{"type": "string", "description": fmt.Sprintf("field %d", i)}
	}
	schema, err := structpb.NewStruct(map[string]any{"type": "object", "properties": props, "required": []any{"p00"}})
	if err != nil {
		t.Fatal(err)
	}
	return &typev1.Tool{Name: name, Description: "looks " + name + " up", InputSchema: schema}
}

// request is a generation request (its tools one message down) with tools.
func request(tools ...*typev1.Tool) *generationv1.GenerateStreamRequest {
	return &generationv1.GenerateStreamRequest{Request: &generationv1.GenerateRequest{
		RunId:    "run-1",
		Target:   &typev1.Target{Provider: "p", Model: "m"},
		Messages: []*typev1.Message{{Role: typev1.Role_ROLE_USER, Content: "hello"}},
		Tools:    tools,
		Sampling: &generationv1.Sampling{Temperature: proto.Float64(0.5)},
	}}
}

// TestSharedToolsEncodeOnceAndDecodeAsBefore: a request with a shared tool is encoded with
// the tool's bytes Share made, decodes (by protobuf, as any receiver does) to the same
// request, tools in order, and its deterministic encoding is protobuf's, byte for byte, for
// the request and for an equal one whose tools are not shared (a hash of one is a hash of
// the other), unknown fields included.
func TestSharedToolsEncodeOnceAndDecodeAsBefore(t *testing.T) {
	sharedTool, ownTool := tool(t, "shared"), tool(t, "own")
	Share(sharedTool)
	req := request(sharedTool, ownTool)

	b, err := AppendMarshal(nil, req, proto.MarshalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	enc, ok := shared(sharedTool)
	if !ok {
		t.Fatal("the shared tool has no encoding")
	}
	if !bytes.Contains(b, enc) {
		t.Error("the request does not carry the shared tool's encoding")
	}
	got := &generationv1.GenerateStreamRequest{}
	if err := proto.Unmarshal(b, got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, req) {
		t.Errorf("decoded %v, want %v", got, req)
	}

	det := proto.MarshalOptions{Deterministic: true}
	req.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 77, protowire.VarintType), 5))
	canonical, err := det.Marshal(proto.CloneOf(req)) // a copy: its tools are not shared
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		got, err := AppendMarshal(nil, req, det)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, canonical) {
			t.Fatalf("the deterministic encoding is\n%x\nprotobuf's is\n%x", got, canonical)
		}
	}

	plain := request(ownTool)
	b, err = AppendMarshal([]byte("prefix"), plain, det)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := det.MarshalAppend([]byte("prefix"), plain)
	if !bytes.Equal(b, want) {
		t.Error("a message without a shared tool is not encoded as protobuf encodes it")
	}
}

// TestUnmarshalDecodesEachToolOnce: requests carrying equal tool bytes get the same decoded
// tool; another tool is decoded anew; the rest of each request is its own; the result is
// what protobuf decodes.
func TestUnmarshalDecodesEachToolOnce(t *testing.T) {
	a, b := tool(t, "a"), tool(t, "b")
	Share(a, b)
	decodeReq := func(tools ...*typev1.Tool) *generationv1.GenerateStreamRequest {
		t.Helper()
		req := request(tools...)
		enc, err := AppendMarshal(nil, req, proto.MarshalOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := &generationv1.GenerateStreamRequest{Request: &generationv1.GenerateRequest{RunId: "left over"}}
		if err := Unmarshal(enc, got); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, req) {
			t.Fatalf("decoded %v, want %v", got, req)
		}
		return got
	}
	first, second := decodeReq(a, b), decodeReq(a)
	if first.GetRequest().GetTools()[0] != second.GetRequest().GetTools()[0] {
		t.Error("equal tool bytes were decoded twice")
	}
	if first.GetRequest().GetTools()[0] == first.GetRequest().GetTools()[1] {
		t.Error("two tools share one decoded copy")
	}
	if first.GetRequest().GetMessages()[0] == second.GetRequest().GetMessages()[0] {
		t.Error("a message that is not a tool is shared")
	}

	changed := tool(t, "a")
	changed.Description = "looks a up, better"
	Share(changed)
	if got := decodeReq(changed).GetRequest().GetTools()[0]; got == first.GetRequest().GetTools()[0] || got.GetDescription() != changed.GetDescription() {
		t.Errorf("a changed tool decoded as %v", got)
	}
}

// TestUnmarshalKeepsProtobufsErrorsAndUnknownFields: bytes protobuf refuses are refused, a
// tool that is not valid UTF-8 too; fields this build does not know survive.
func TestUnmarshalKeepsProtobufsErrorsAndUnknownFields(t *testing.T) {
	good, err := AppendMarshal(nil, request(tool(t, "x")), proto.MarshalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"truncated": good[:len(good)-3],
		"bad utf-8 in a tool name": protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType),
			protowire.AppendBytes(protowire.AppendTag(nil, 4, protowire.BytesType),
				protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "\xff"))),
	} {
		if err := Unmarshal(b, &generationv1.GenerateStreamRequest{}); err == nil {
			t.Errorf("%s: decoded without an error", name)
		} else if perr := proto.Unmarshal(b, &generationv1.GenerateStreamRequest{}); perr == nil || perr.Error() != err.Error() {
			t.Errorf("%s: error %q, protobuf's is %v", name, err, perr)
		}
	}

	unknown := protowire.AppendString(protowire.AppendTag(append([]byte(nil), good...), 99, protowire.BytesType), "future")
	got := &generationv1.GenerateStreamRequest{}
	if err := Unmarshal(unknown, got); err != nil {
		t.Fatal(err)
	}
	again, err := proto.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(again, unknown[len(good):]) {
		t.Error("an unknown field was lost")
	}
}

// TestCodecRoundTrip: gRPC's path, shared tools out and each distinct tool decoded once in.
func TestCodecRoundTrip(t *testing.T) {
	c := NewCodec()
	if c.Name() != "proto" {
		t.Errorf("name %q, want proto", c.Name())
	}
	a := tool(t, "codec")
	Share(a)
	for _, req := range []*generationv1.GenerateStreamRequest{request(a), request(tool(t, "unshared")), request()} {
		data, err := c.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		got := &generationv1.GenerateStreamRequest{}
		if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(data.Materialize())}, got); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, req) {
			t.Errorf("decoded %v, want %v", got, req)
		}
	}
}

// TestCodecEncodesAnyLengthInPooledBuffers: requests with shared tools whose lengths rise past
// the buffer the last one fitted, and fall again, each encode to protobuf's bytes, whatever
// the length of the nested request takes to write (one byte up to 127, two from 128 on).
func TestCodecEncodesAnyLengthInPooledBuffers(t *testing.T) {
	c := NewCodec()
	a, tiny := tool(t, "pooled"), &typev1.Tool{Name: "tiny"}
	Share(a, tiny)
	for _, n := range []int{0, 40, 4000, 100, 70000, 10} {
		req := request(a)
		req.Request.Messages[0].Content = strings.Repeat("y", n)
		if n == 0 {
			req.Request = &generationv1.GenerateRequest{Tools: []*typev1.Tool{tiny}} // a nested length of one byte
		}
		data, err := c.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if got := data.Materialize(); !bytes.Equal(got, want) {
			t.Errorf("content of %d bytes: encoded %d bytes unlike protobuf's %d", n, len(got), len(want))
		}
		data.Free()
	}
}

// TestShareForgetsCollectedTools: the encoding of a shared tool goes once the tool is
// collected.
func TestShareForgetsCollectedTools(t *testing.T) {
	count := func() int {
		n := 0
		encodings.Range(func(any, any) bool { n++; return true })
		return n
	}
	before := count()
	func() { Share(tool(t, "transient")) }()
	for deadline := time.Now().Add(10 * time.Second); count() > before; {
		if time.Now().After(deadline) {
			t.Fatalf("%d encodings after the tool was collected, want %d", count(), before)
		}
		runtime.GC()
		runtime.Gosched()
	}
}

// TestMemoDerivesOncePerSharedTool: a value is derived once for a shared tool (registered, or
// decoded by Unmarshal) and on every call for any other.
func TestMemoDerivesOncePerSharedTool(t *testing.T) {
	var (
		memo    Memo[string]
		derived int
	)
	derive := func(tl *typev1.Tool) string { derived++; return tl.GetName() }

	registered := tool(t, "registered")
	Share(registered)
	enc, err := AppendMarshal(nil, request(registered), proto.MarshalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	received := &generationv1.GenerateStreamRequest{}
	if err := Unmarshal(enc, received); err != nil {
		t.Fatal(err)
	}
	for _, shared := range []*typev1.Tool{registered, received.GetRequest().GetTools()[0]} {
		derived = 0
		for range 3 {
			if got := memo.Get(shared, derive); got != shared.GetName() {
				t.Fatalf("got %q, want %q", got, shared.GetName())
			}
		}
		if derived != 1 {
			t.Errorf("%s: derived %d times, want once", shared.GetName(), derived)
		}
	}

	derived = 0
	own := tool(t, "own")
	for range 3 {
		memo.Get(own, derive)
	}
	if derived != 3 {
		t.Errorf("a tool not shared was derived %d times, want every time (3)", derived)
	}
}

// TestUnmarshalKeepsNoToolOverItsBound: a tool whose encoding alone overflows the bytes the
// cache may hold is decoded for its request only, and decoded right.
func TestUnmarshalKeepsNoToolOverItsBound(t *testing.T) {
	huge := &typev1.Tool{Name: "huge", Description: strings.Repeat("x", maxDecodedBytes)}
	enc, err := AppendMarshal(nil, request(huge), proto.MarshalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got [2]*typev1.Tool
	for i := range got {
		req := &generationv1.GenerateStreamRequest{}
		if err := Unmarshal(enc, req); err != nil {
			t.Fatal(err)
		}
		got[i] = req.GetRequest().GetTools()[0]
	}
	if got[0] == got[1] {
		t.Error("a tool over the cache's bound was kept")
	}
	if !proto.Equal(got[0], huge) {
		t.Error("the huge tool decoded wrong")
	}
	if n := decodedBytes.Load(); n > maxDecodedBytes {
		t.Errorf("the cache holds %d bytes of encodings, over its bound of %d", n, maxDecodedBytes)
	}
}
