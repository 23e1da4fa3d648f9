package mesh_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/generation"
)

// notUTF8 is a body that is not UTF-8: a control byte, then a gzip header's bytes and two
// bytes no UTF-8 sequence starts with.
const notUTF8 = "x\x1f\x8b\xff\xfe y"

// TestAToolsAnswerThatIsNotUTF8 reaches the model with its bad bytes replaced by U+FFFD, and
// the call ledger records it: protobuf strings must be UTF-8, and the tool's result was lost
// after it ran ("tool failed: grpc: error while marshaling"), unrecorded.
func TestAToolsAnswerThatIsNotUTF8(t *testing.T) {
	binary := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(notUTF8))
	}))
	t.Cleanup(binary.Close)
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{"lookup": {Description: "Looks the answer up.", URL: binary.URL}}
	h := start(t, cfg, llmtest.Scenario{Name: "binary tool", Match: "look the answer up", Turns: []llmtest.Turn{
		call("lookup", `{}`), text("It is x."),
	}})
	res := h.run(t, &agentv1.RunRequest{Message: "look the answer up"})
	if got, want := toolMessage(t, res, 0), "x\x1f\uFFFD y"; !res.GetSuccess() || got != want {
		t.Fatalf("outcome %s, tool message %q; want a success that saw %q", res.GetOutcome(), got, want)
	}
	checkInvariants(t, res)
	if logs := h.logs.String(); strings.Contains(logs, "did not record") {
		t.Errorf("the call ledger did not record the call:\n%s", logs)
	}
}

// TestAProvidersAnswerThatIsNotUTF8 fails the run as a bad response, over gRPC and with the
// stages in process, and recovery decides on a BAD_RESPONSE. The error quotes the answer's
// start with its bad bytes replaced: over gRPC the error's StageError detail, which could not
// be encoded, was dropped (recovery saw an UNAVAILABLE of no class), and in process the run's
// checkpoint could not be encoded, and the run hung.
func TestAProvidersAnswerThatIsNotUTF8(t *testing.T) {
	binary := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: " + notUTF8 + "\n\n"))
	}))
	t.Cleanup(binary.Close)
	for _, inProcess := range []bool{false, true} {
		name := "grpc"
		if inProcess {
			name = "in process"
		}
		t.Run(name, func(t *testing.T) {
			h := startOptions(t, nil, 1, func(cfg *config.Config, _ string) {
				cfg.Providers["scripted"] = config.Provider{Type: "openai", BaseURL: binary.URL + "/v1", APIKey: "test-key"}
			}, func(o *mesh.Options) { o.InProcess = inProcess }, llmtest.Scenario{Match: "hi", Turns: []llmtest.Turn{text("hello")}})
			res := h.run(t, &agentv1.RunRequest{Message: "hi"})
			if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_PROVIDER {
				t.Fatalf("outcome %s %s, want FAILED_PROVIDER", res.GetOutcome(), res.GetExitReason())
			}
			for _, a := range res.GetAccounting() {
				if e := a.GetError(); !strings.Contains(e, "is not valid JSON") || !strings.Contains(e, "x\x1f\uFFFD y") || !utf8.ValidString(e) {
					t.Errorf("accounting error %q, want the bad response quoted as UTF-8", e)
				}
			}
			evs, _ := h.storedEvents(t, res.GetRunId())
			decided := 0
			for _, ev := range evs {
				if d := ev.GetRecoveryDecided(); d != nil {
					decided++
					if c := d.GetError().GetErrorClass(); c != typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE {
						t.Errorf("recovery decided on a failure of class %s, want BAD_RESPONSE", c)
					}
				}
			}
			if decided == 0 {
				t.Error("no recovery_decided event")
			}
		})
	}
}

// notUTF8Provider is a provider of Go code (mesh.Options.Providers) whose answers end in bytes
// that are not UTF-8: a defect of a provider linked into the mesh, which no wire format
// filters.
type notUTF8Provider struct{ generation.Provider }

func (p notUTF8Provider) Complete(ctx context.Context, req *generation.Request) (*generation.Response, error) {
	res, err := p.Provider.Complete(ctx, req)
	if err == nil {
		res.Content += notUTF8
	}
	return res, err
}

func (p notUTF8Provider) Stream(ctx context.Context, req *generation.Request, onDelta func(*generationv1.Delta) error) (*generation.Response, error) {
	res, err := p.Provider.Stream(ctx, req, onDelta)
	if err == nil {
		res.Content += notUTF8
		err = onDelta(&generationv1.Delta{Content: notUTF8})
	}
	return res, err
}

// TestAProviderOfGoCodeAnsweringNotUTF8 finishes the run with the answer's bad bytes replaced
// by U+FFFD, over gRPC and with the stages in process. Over gRPC the generation stage's answer
// could not be encoded (the run failed as if the provider had); in process the run's
// checkpoint could not be, and the run waited for the store until its deadline.
func TestAProviderOfGoCodeAnsweringNotUTF8(t *testing.T) {
	for _, inProcess := range []bool{false, true} {
		name := "grpc"
		if inProcess {
			name = "in process"
		}
		t.Run(name, func(t *testing.T) {
			h := startOptions(t, nil, 1, nil, func(o *mesh.Options) {
				o.InProcess = inProcess
				providers, err := generation.ProvidersFromConfig(o.Config)
				if err != nil {
					t.Fatal(err)
				}
				o.Providers = map[string]generation.Provider{"scripted": notUTF8Provider{providers["scripted"]}}
			}, llmtest.Scenario{Match: "hi", Turns: []llmtest.Turn{text("hello")}})
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			o := &agentv1.RunOverrides{}
			streamAnswers(o) // the answer's fragments are checked below
			res, err := h.client.Run(ctx, &agentv1.RunRequest{Message: "hi", Overrides: o})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if want := "hello" + strings.ToValidUTF8(notUTF8, "\uFFFD"); !res.GetSuccess() || res.GetFinalReport().GetContent() != want {
				t.Fatalf("outcome %s %s, answer %q; want a success answering %q", res.GetOutcome(), res.GetExitReason(), res.GetFinalReport().GetContent(), want)
			}
			checkInvariants(t, res)
			evs, _ := h.storedEvents(t, res.GetRunId())
			if !slices.ContainsFunc(evs, func(ev *eventv1.RunEvent) bool {
				return ev.GetLlmDelta().GetContent() == strings.ToValidUTF8(notUTF8, "\uFFFD")
			}) {
				t.Errorf("no llm_delta event carries the fragment %q with its bad bytes replaced", notUTF8)
			}
		})
	}
}
