package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/transcript"
	"google.golang.org/protobuf/encoding/protojson"
)

func TestTranscriptVerifyFile(t *testing.T) {
	chain := transcript.NewChain("adapter", "rules/rules-v1")
	for _, st := range []typev1.RunState{typev1.RunState_RUN_STATE_PRECHECK, typev1.RunState_RUN_STATE_INFER, typev1.RunState_RUN_STATE_TERMINATE} {
		chain.Append(st, "s", "contract", &typev1.Message{Content: st.String()}, nil, "")
	}
	result := &typev1.RunResult{RunId: "run-1", Transcript: chain.Entries()}
	write := func(r *typev1.RunResult) string {
		b, err := protojson.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), "result.json")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"transcript", "verify", "--file", write(result)}, &stdout, &stderr); code != 0 {
		t.Fatalf("intact transcript: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "3 entries, chain intact") {
		t.Errorf("output %q", stdout.String())
	}
	result.Transcript[1].ResultHash = "forged"
	stdout.Reset()
	stderr.Reset()
	if code := run(t.Context(), []string{"transcript", "verify", "--file", write(result)}, &stdout, &stderr); code != 1 {
		t.Fatalf("tampered transcript: exit %d, want 1", code)
	}
	if !strings.Contains(stderr.String(), "entry 2") {
		t.Errorf("error %q does not name entry 2", stderr.String())
	}
}
