package memory

import (
	"bytes"
	"errors"
	"fmt"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// learningField is the number of RunResult.learning, which a store keeps apart from the run's
// result: the learning stage writes it after the run is saved.
var learningField = (&typev1.RunResult{}).ProtoReflect().Descriptor().Fields().ByName("learning").Number()

// encodeResult is the protobuf encoding of result without its learning. The learning's bytes
// are cut out of the whole result's encoding, so the result is not deep-copied to clear one
// field.
func encodeResult(result *typev1.RunResult) ([]byte, error) {
	raw, err := proto.Marshal(result)
	if err != nil {
		return nil, fmt.Errorf("encode run result: %w", err)
	}
	if raw, err = withoutField(raw, learningField); err != nil {
		return nil, fmt.Errorf("encode run result: %w", err)
	}
	return raw, nil
}

// withoutField removes every occurrence of the top-level field num from the encoded message b,
// in place, and returns what is left.
func withoutField(b []byte, num protowire.Number) ([]byte, error) {
	out := b[:0] // written behind what is read: each kept field moves back or stays
	for len(b) > 0 {
		n, typ, tagLen := protowire.ConsumeTag(b)
		if tagLen < 0 {
			return nil, protowire.ParseError(tagLen)
		}
		valueLen := protowire.ConsumeFieldValue(n, typ, b[tagLen:])
		if valueLen < 0 {
			return nil, protowire.ParseError(valueLen)
		}
		if n != num {
			out = append(out, b[:tagLen+valueLen]...)
		}
		b = b[tagLen+valueLen:]
	}
	return out, nil
}

// errCorruptChain is a stored transcript whose records do not parse: a defect of the store.
var errCorruptChain = errors.New("stored transcript is corrupt")

// decodeEntries decodes a stored transcript: its entries, each length-prefixed
// (protodelim.MarshalTo), one after the other.
func decodeEntries(records []byte) ([]*typev1.TranscriptEntry, error) {
	var out []*typev1.TranscriptEntry
	for r := bytes.NewReader(records); r.Len() > 0; {
		e := &typev1.TranscriptEntry{}
		// No size limit: the store reads back only what it wrote.
		if err := (protodelim.UnmarshalOptions{MaxSize: -1}).UnmarshalFrom(r, e); err != nil {
			return nil, fmt.Errorf("%w: %w", errCorruptChain, err)
		}
		out = append(out, e)
	}
	return out, nil
}
